// Chapter 9's --attention rung in the model (ch09_advanced/attention_choice.h), on the CPU:
// - ag::flash_attention and ag::batched_attention against the core's ag::attention, values and qkv gradients, on
//   fresh random inputs that cross a tile boundary: f32 storage to float rounding; bf16 storage (qkv rounded for
//   the call) to bf16's;
// - a tiny GPT-2 trained 50 steps with flash attention follows the materialised run's losses, and 20 steps with the
//   one-pass backward gives flash's losses bit for bit;
// - what the forward keeps is, byte for byte, chapter 7's theory with flash attention (one log-sum-exp per head
//   and token instead of the probabilities), under every recompute policy (selective keeps flash attention), and
//   with batched attention in bf16 (the probabilities in 2 bytes);
// - the choice's names and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ch07_memory/chunked_lm_head.h"
#include "ch07_memory/memory_theory.h"
#include "ch07_memory/recompute.h"
#include "ch09_advanced/attention_choice.h"
#include "common/autograd/functions.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/nn/gpt2.h"
#include "tests/ch09_advanced/attention_choice_run.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::random_normal;

ModelOptions::AttentionFn attention_in(ch09::Attention attention, DType storage) {
  ModelOptions options;
  ch09::use_attention(options, attention, storage);
  return options.attention;
}

struct FunctionCase {
  DType storage;
  double tolerance;  // of max_scaled_error against the materialised f32 function
};

TEST(AttentionChoice, FlashFunctionMatchesTheCoreAttention) {
  // B=2, T=130 (two full 64-row tiles and a partial one), 3 heads of 24 (a head size the tiles pad).
  const int n_head = 3;
  Rng rng(21);
  const Tensor qkv = random_normal({2, 130, 3 * 72}, rng), dout = random_normal({2, 130, 72}, rng);
  const test::AttentionRun reference = test::run_attention_function(ag::attention, qkv, dout, n_head, Device::cpu());
  // f32: the same sums in another order (the online softmax); bf16: q, k, v, the output and both gradients
  // rounded to 8 significant bits, a relative error of 2^-9 each, a few of them compounded.
  for (const ch09::Attention attention : {ch09::Attention::Flash, ch09::Attention::Batched})
    for (const FunctionCase c : {FunctionCase{DType::F32, 1e-5}, FunctionCase{DType::BF16, 3e-2}}) {
      SCOPED_TRACE(cat(ch09::attention_name(attention), " in ", dtype_name(c.storage)));
      const test::AttentionRun run =
          test::run_attention_function(attention_in(attention, c.storage), qkv, dout, n_head, Device::cpu());
      EXPECT_LT(test::max_scaled_error(run.out, reference.out), c.tolerance);
      EXPECT_LT(test::max_scaled_error(run.dqkv, reference.dqkv), c.tolerance);
    }
}

TEST(AttentionChoice, ATinyGpt2TrainsWithFlashAsWithMaterialisedAttention) {
  const test::TrainingRun materialized =
      test::train_tiny_gpt2(ch09::Attention::Materialized, DType::F32, Device::cpu(), 50);
  const test::TrainingRun flash = test::train_tiny_gpt2(ch09::Attention::Flash, DType::F32, Device::cpu(), 50);
  ASSERT_EQ(flash.losses.size(), materialized.losses.size());
  // fp32 rounding differences, carried through 50 updates of lr 1e-3.
  for (size_t s = 0; s < flash.losses.size(); ++s)
    EXPECT_NEAR(flash.losses[s], materialized.losses[s], 1e-3) << "step " << s;
  EXPECT_LT(materialized.losses.back(), materialized.losses.front() - 0.5);  // the steps trained
  EXPECT_LT(flash.activation_peak, materialized.activation_peak);
}

// On the CPU the one-pass backward makes the two passes' sums in their order (test_flash_attention_cpu): the same
// losses, bit for bit, over 20 steps, and the same activations kept.
TEST(AttentionChoice, ATinyGpt2TrainsWithFlashOnePassAsWithFlash) {
  const test::TrainingRun flash = test::train_tiny_gpt2(ch09::Attention::Flash, DType::F32, Device::cpu(), 20);
  const test::TrainingRun one_pass =
      test::train_tiny_gpt2(ch09::Attention::FlashOnePass, DType::F32, Device::cpu(), 20);
  EXPECT_EQ(one_pass.losses, flash.losses);
  EXPECT_EQ(one_pass.activation_peak, flash.activation_peak);
}

// The activation bytes a recorded forward of `model` keeps on B x T random tokens (its losses among them).
int64_t bytes_kept_by_forward(const GPT2& model, int64_t B, int64_t T) {
  Rng rng(3);
  const int64_t vocab = model.config().vocab_size;
  const Tensor tokens = test::random_ids({B, T}, rng, vocab), targets = test::random_ids({B, T}, rng, vocab);
  const int64_t before = memory_stats(Device::cpu()).live_of(MemCategory::Activations);
  Tape tape;
  const Tensor losses = model.loss(tape, tokens, targets);
  return memory_stats(Device::cpu()).live_of(MemCategory::Activations) - before;
}

TEST(AttentionChoice, TheForwardKeepsTheTheoryUnderEveryRecomputePolicy) {
  const GPT2Config config = test::tiny_gpt2_config(97, 2, 4, 64, 160);
  const int64_t B = 2, T = 96;
  // Flash attention with every policy; batched attention in bf16 (its probabilities in 2 bytes) without recompute
  // and with block recompute (selective is refused with it: test_model_rungs).
  struct Case {
    ch09::Attention attention;
    DType storage;
    ch07::RecomputePolicy policy;
  };
  const Case cases[] = {{ch09::Attention::Flash, DType::F32, ch07::RecomputePolicy::None},
                        {ch09::Attention::FlashOnePass, DType::F32, ch07::RecomputePolicy::Selective},
                        {ch09::Attention::Flash, DType::F32, ch07::RecomputePolicy::Selective},
                        {ch09::Attention::Flash, DType::F32, ch07::RecomputePolicy::Block},
                        {ch09::Attention::Batched, DType::BF16, ch07::RecomputePolicy::None},
                        {ch09::Attention::Batched, DType::BF16, ch07::RecomputePolicy::Block}};
  for (const Case& c : cases) {
    const ch07::RecomputePolicy policy = c.policy;
    SCOPED_TRACE(cat(ch09::attention_name(c.attention), ", recompute ", ch07::recompute_policy_name(policy)));
    ModelOptions options;
    ch09::use_attention(options, c.attention, c.storage);  // before the policy, as the trainer
    ch07::apply_recompute(options, policy);
    GPT2 model(config, Device::cpu(), options);
    model.init_weights(1);
    const int64_t stored = bytes_kept_by_forward(model, B, T);
    const int64_t theory = ch07::memory_theory(config, B, T, policy, 4, ch09::attention_kept(c.attention, c.storage))
                               .of(MemCategory::Activations);
    EXPECT_EQ(stored, theory);
    // Without recompute, the log-sum-exps instead of the probabilities; selective recompute keeps neither of the
    // materialised attention's (and flash attention's log-sum-exps beside); block keeps each block's input alone.
    if (policy == ch07::RecomputePolicy::None) {
      EXPECT_LT(theory, ch07::memory_theory(config, B, T, policy).of(MemCategory::Activations));
    }
  }
}

TEST(AttentionChoice, TheForwardKeepsTheTheoryWith16BitActivations) {
  // 16-bit activations end to end (bf16 matmuls, ModelOptions::activations bf16): every kept tensor in 2 bytes
  // but LayerNorm's statistics and the loss, and the materialised attention's probabilities (the core's attention
  // runs in fp32 on widened inputs), with each attention and each recompute policy (selective is refused with
  // batched attention: test_model_rungs), and with the chunked LM head (ch07_memory/chunked_lm_head.h).
  const GPT2Config config = test::tiny_gpt2_config(97, 2, 4, 64, 160);
  const int64_t B = 2, T = 96;
  for (const ch09::Attention attention :
       {ch09::Attention::Materialized, ch09::Attention::Batched, ch09::Attention::Flash})
    for (const ch07::RecomputePolicy policy : ch07::recompute_policies())
      for (const ch07::LmHead head : {ch07::LmHead::Full, ch07::LmHead::Chunked}) {
        if (attention == ch09::Attention::Batched && ch07::is_selective(policy)) continue;
        SCOPED_TRACE(cat(ch09::attention_name(attention), ", recompute ", ch07::recompute_policy_name(policy), ", ",
                         ch07::lm_head_name(head), " head"));
        ModelOptions options;
        ch09::use_attention(options, attention, DType::BF16);
        ch07::apply_recompute(options, policy);
        ch07::use_lm_head(options, head);
        options.activations = DType::BF16;
        GPT2 model(config, Device::cpu(), options);
        model.init_weights(1);
        model.set_matmul_dtype(DType::BF16);
        const int64_t stored = bytes_kept_by_forward(model, B, T);
        const ch07::AttentionKept kept = ch09::attention_kept(attention, DType::BF16, DType::BF16);
        EXPECT_EQ(stored, ch07::memory_theory(config, B, T, policy, 4, kept, 2, 0, head).of(MemCategory::Activations));
      }
}

TEST(AttentionChoice, GPT2SmallKeepsUnder2Point5GBWithFlashAnd16BitActivations) {
  // The theory the tests above hold the allocator to, at GPT-2 124M (d12), B=8, T=1024: what the forward keeps
  // for backward, in bytes. bf16 matmuls with fp32 activations and fp32 probabilities (the path before chapter 9)
  // keep 11.36e9 bytes (the H100 run's 11.75 GB activation peak was measured when the projections' outputs were
  // kept too, 11.97e9 by the theory of then, with backward's gradients in flight). Flash attention keeps a
  // log-sum-exp per head instead of the T x T probabilities and 16-bit activations halve the rest: 3.27e9 without
  // recompute. Under 2.5e9 three ways: by dropping the logits (the chunked LM head), 2.45e9; with the GELU outputs
  // dropped too (selective recompute: one GELU kernel per block in backward), 1.84e9; or with block recompute
  // (each block's input kept, one block recomputed at a time during backward: its bytes are added here), 1.20e9.
  const GPT2Config d12 = GPT2Config::from_name("d12");
  const int64_t B = 8, T = 1024;
  const auto kept = [&](ch07::RecomputePolicy policy, ch07::AttentionKept attention, int64_t activation_bytes,
                        ch07::LmHead head = ch07::LmHead::Full) {
    const ch07::MemoryTheory t = ch07::memory_theory(d12, B, T, policy, 4, attention, activation_bytes, 0, head);
    return t.of(MemCategory::Activations) + t.recomputed_block_bytes;
  };
  const auto flash = ch07::AttentionKept::LogSumExp;
  const int64_t before = kept(ch07::RecomputePolicy::None, ch07::AttentionKept::Probabilities, 4);
  const int64_t flash_16bit = kept(ch07::RecomputePolicy::None, flash, 2);
  const int64_t chunked = kept(ch07::RecomputePolicy::None, flash, 2, ch07::LmHead::Chunked);
  const int64_t selective_chunked = kept(ch07::RecomputePolicy::Selective, flash, 2, ch07::LmHead::Chunked);
  const int64_t flash_16bit_block = kept(ch07::RecomputePolicy::Block, flash, 2);
  EXPECT_NEAR(static_cast<double>(before), 11.36e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(flash_16bit), 3.27e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(chunked), 2.45e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(selective_chunked), 1.84e9, 0.01e9);
  EXPECT_NEAR(static_cast<double>(flash_16bit_block), 1.20e9, 0.01e9);
  EXPECT_LT(chunked, 2'500'000'000);
  // Selective recompute alone is not enough: the logits are 0.82e9 of 3.27e9, the GELU outputs 0.60e9.
  EXPECT_GT(kept(ch07::RecomputePolicy::Selective, flash, 2), 2'500'000'000);
  std::printf(
      "d12, B=8, T=1024, kept for backward: bf16 with fp32 activations and probabilities %.2f GB; flash + "
      "16-bit activations %.2f GB; + the chunked LM head %.2f GB; + selective recompute %.2f GB; block recompute "
      "instead %.2f GB\n",
      static_cast<double>(before) / 1e9, static_cast<double>(flash_16bit) / 1e9, static_cast<double>(chunked) / 1e9,
      static_cast<double>(selective_chunked) / 1e9, static_cast<double>(flash_16bit_block) / 1e9);
}

TEST(AttentionChoice, NamesAndErrors) {
  for (const std::string& name : ch09::attention_names())
    EXPECT_EQ(ch09::attention_name(ch09::parse_attention(name)), name);
  testing::expect_error([] { ch09::parse_attention("fast"); }, ErrorKind::InvalidArgument,
                        {"'fast'", "materialized|batched|flash|flash-one-pass|flash-tuned"});
  ModelOptions options;
  testing::expect_error([&] { ch09::use_attention(options, ch09::Attention::Flash, DType::I32); },
                        ErrorKind::InvalidArgument, {"--attention"});
  // Materialised attention is the core's own: nothing replaced.
  ch09::use_attention(options, ch09::Attention::Materialized, DType::BF16);
  ASSERT_NE(options.attention.target<Var (*)(Tape&, const Var&, int)>(), nullptr);
  EXPECT_EQ(*options.attention.target<Var (*)(Tape&, const Var&, int)>(), &ag::attention);
  // The note is for flash in f32 on a GPU, and for the one-pass backward's atomics on a GPU.
  EXPECT_FALSE(ch09::attention_note(ch09::Attention::Flash, Device::cuda(0), DType::F32).empty());
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::Flash, Device::cuda(0), DType::BF16).empty());
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::Flash, Device::cpu(), DType::F32).empty());
  EXPECT_NE(ch09::attention_note(ch09::Attention::FlashOnePass, Device::cuda(0), DType::F32).find("flash-one-pass"),
            std::string::npos);
  EXPECT_NE(ch09::attention_note(ch09::Attention::FlashOnePass, Device::cuda(0), DType::BF16).find("atomics"),
            std::string::npos);
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::FlashOnePass, Device::cpu(), DType::BF16).empty());
  // flash-tuned times CUDA kernels: on the CPU it says it is flash; in 16 bits on a GPU there is nothing to say.
  EXPECT_NE(ch09::attention_note(ch09::Attention::FlashTuned, Device::cpu(), DType::BF16).find("flash itself"),
            std::string::npos);
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::FlashTuned, Device::cuda(0), DType::BF16).empty());
  EXPECT_FALSE(ch09::attention_note(ch09::Attention::FlashTuned, Device::cuda(0), DType::F32).empty());
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::Materialized, Device::cuda(0), DType::F32).empty());
  EXPECT_FALSE(ch09::attention_note(ch09::Attention::Batched, Device::cpu(), DType::F32).empty());
  EXPECT_TRUE(ch09::attention_note(ch09::Attention::Batched, Device::cpu(), DType::BF16).empty());
}

}  // namespace
}  // namespace lab
