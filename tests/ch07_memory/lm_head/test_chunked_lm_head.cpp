// The chunked LM head on the CPU (ch07_memory/chunked_lm_head.h): the full head's losses and gradients in every
// precision and with chapter 6's classifier, at chunk boundaries that divide the rows and that do not; the bytes
// the forward keeps are the theory's, with the head's input gradient instead of the logits; an evaluation without
// gradients gives the same losses and writes no gradient; the flag's names and refusals.
#include <gtest/gtest.h>

#include "ch06_single_gpu/fused_classifier.h"
#include "ch07_memory/chunked_lm_head.h"
#include "ch07_memory/memory_theory.h"
#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/util/rng.h"
#include "tests/ch07_memory/lm_head/lm_head_check.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::HeadCase;

TEST(ChunkedLmHead, MatchesTheFullHeadInFp32) {
  // The same products over row slices; wte's gradient sums the chunks' products in another order.
  test::expect_chunked_head_matches_full(Device::cpu(), {}, 1e-5);
}

TEST(ChunkedLmHead, MatchesTheFullHeadUnderBf16MatmulsAndActivations) {
  test::expect_chunked_head_matches_full(Device::cpu(), {DType::BF16, false}, 1e-5);
  test::expect_chunked_head_matches_full(Device::cpu(), {DType::BF16, true}, 1e-5);
  test::expect_chunked_head_matches_full(Device::cpu(), {DType::F16, true}, 1e-5);
}

TEST(ChunkedLmHead, RunsTheInstalledClassifier) {
  test::expect_chunked_head_matches_full(Device::cpu(), {DType::F32, false, ch06::fused_classifier}, 1e-5);
}

TEST(ChunkedLmHead, TheForwardKeepsTheTheory) {
  // A tiny GPT-2 whose vocabulary is large beside its width, as GPT-2's is (50304 against 768): the logits are
  // most of what the head keeps.
  const GPT2Config config = test::tiny_gpt2_config(1000, 2, 4, 32, 64);
  const int64_t B = 2, T = 24;
  for (const bool activations_16bit : {false, true})
    for (const ch07::LmHead head : {ch07::LmHead::Full, ch07::LmHead::Chunked}) {
      SCOPED_TRACE(cat(ch07::lm_head_name(head), activations_16bit ? ", bf16 activations" : ""));
      ModelOptions options;
      ch07::use_lm_head(options, head);
      if (activations_16bit) options.activations = DType::BF16;
      GPT2 model(config, Device::cpu(), options);
      model.init_weights(1);
      model.set_matmul_dtype(activations_16bit ? DType::BF16 : DType::F32);
      Rng rng(3);
      const Tensor tokens = test::random_ids({B, T}, rng, config.vocab_size);
      const int64_t before = memory_stats(Device::cpu()).live_of(MemCategory::Activations);
      Tape tape;
      const Tensor losses = model.loss(tape, tokens, tokens);
      const int64_t kept = memory_stats(Device::cpu()).live_of(MemCategory::Activations) - before;
      const int64_t act = activations_16bit ? 2 : 4;
      // The core's attention keeps fp32 probabilities under 16-bit activations (it runs in fp32).
      const ch07::AttentionKept probabilities =
          activations_16bit ? ch07::AttentionKept::F32Probabilities : ch07::AttentionKept::Probabilities;
      EXPECT_EQ(kept, ch07::memory_theory(config, B, T, ch07::RecomputePolicy::None, 4, probabilities, act, 0, head)
                          .of(MemCategory::Activations));
      if (head == ch07::LmHead::Chunked) {  // the logits gone; the head input's gradient kept instead of its value
        EXPECT_EQ(ch07::memory_theory(config, B, T, ch07::RecomputePolicy::None).activation_bytes_per_token -
                      ch07::memory_theory(config, B, T, ch07::RecomputePolicy::None, 4,
                                          ch07::AttentionKept::Probabilities, 0, 0, head)
                          .activation_bytes_per_token,
                  4 * config.padded_vocab_size);
      }
    }
}

TEST(ChunkedLmHead, TheStepsPeakFallsByNearlyTheLogits) {
  // GPT-2's vocabulary at a small width: one step's allocator peak, all categories, with the default chunk (64
  // rows of 512: each chunk's logits 1/8 of the whole) against the full head, whose logits set the peak.
  const GPT2Config config = test::tiny_gpt2_config(50257, 2, 4, 64, 256);
  const int64_t B = 2, T = 256;
  int64_t peaks[2] = {0, 0};
  for (const ch07::LmHead head : {ch07::LmHead::Full, ch07::LmHead::Chunked}) {
    ModelOptions options;
    ch07::use_lm_head(options, head);
    GPT2 model(config, Device::cpu(), options);
    Rng rng(2);
    const Tensor tokens = test::random_ids({B, T}, rng, config.vocab_size);
    model.parameters().zero_grad();
    allocator_for(Device::cpu()).reset_peak();
    const int64_t before = memory_stats(Device::cpu()).live_total;
    {
      Tape tape;
      model.loss(tape, tokens, tokens);
      tape.backward();
    }
    peaks[static_cast<int>(head)] = memory_stats(Device::cpu()).peak_total - before;
  }
  const int64_t logits = B * T * config.padded_vocab_size * 4;
  EXPECT_LT(peaks[1], peaks[0] - logits / 2) << "full " << peaks[0] << " bytes, chunked " << peaks[1];
}

TEST(ChunkedLmHead, AnEvaluationWithoutGradientsGivesTheSameLossesAndWritesNoGradient) {
  const GPT2Config config = test::tiny_gpt2_config(97, 2, 4, 64, 96);
  ModelOptions options;
  ch07::use_lm_head(options, ch07::LmHead::Chunked);
  GPT2 chunked(config, Device::cpu(), options), full(config, Device::cpu());
  chunked.init_weights(5);
  full.init_weights(5);
  Rng rng(6);
  const Tensor tokens = test::random_ids({3, 20}, rng, config.vocab_size);
  chunked.parameters().zero_grad();
  Tape no_grad(false), full_tape(false);
  const std::vector<float> losses = chunked.loss(no_grad, tokens, tokens).to_floats();
  EXPECT_LT(test::max_scaled_error(losses, full.loss(full_tape, tokens, tokens).to_floats()), 1e-5);
  for (const float g : chunked.parameters().grads().to_floats()) ASSERT_EQ(g, 0.0f);
}

TEST(ChunkedLmHead, NamesAndRefusals) {
  for (const std::string& name : ch07::lm_head_names())
    EXPECT_STREQ(ch07::lm_head_name(ch07::parse_lm_head(name)), name.c_str());
  testing::expect_error([] { ch07::parse_lm_head("sliced"); }, ErrorKind::InvalidArgument,
                        {"'sliced'", "full|chunked"});
  EXPECT_EQ(ch07::lm_head_chunk_rows(8 * 1024, 50304, 768), 128);  // GPT-2 124M, B=8, T=1024: 64 chunks
  EXPECT_EQ(ch07::lm_head_chunk_rows(1024, 50304, 768), 64);
  EXPECT_EQ(ch07::lm_head_chunk_rows(10, 50304, 768), 10);
  EXPECT_EQ(ch07::lm_head_chunk_rows(4096, 128, 64), 2048);
  // Installed with a ZeRO-style head hook beside it, the model refuses at its first loss, in one line.
  const GPT2Config config = test::tiny_gpt2_config(97, 2, 4, 64, 96);
  ModelOptions options;
  ch07::use_lm_head(options, ch07::LmHead::Chunked);
  options.lm_head = [](Tape& tape, const Var& x, const Var& wte) { return ag::linear(tape, x, wte, Var()); };
  GPT2 model(config, Device::cpu(), options);
  Rng rng(1);
  const Tensor tokens = test::random_ids({1, 8}, rng, config.vocab_size);
  Tape tape;
  testing::expect_error([&] { model.loss(tape, tokens, tokens); }, ErrorKind::InvalidArgument,
                        {"--lm-head chunked", "ZeRO"});
}

}  // namespace
}  // namespace lab
