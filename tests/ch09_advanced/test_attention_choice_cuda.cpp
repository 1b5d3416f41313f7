// Chapter 9's --attention rung on CUDA (label cuda: runs in the emulation build, skips without a GPU):
// ag::flash_attention in bf16 storage, the tensor-core kernels, against the core's attention on the CPU (values
// and qkv gradients), and a tiny GPT-2 in bf16 mixed precision trained a few steps with flash attention beside
// the materialised run on the same device, keeping fewer activation bytes; with the one-pass backward, and with the
// kernel sets chosen by timing (flash-tuned: flash's bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ch09_advanced/attention_choice.h"
#include "common/autograd/functions.h"
#include "common/core/device.h"
#include "common/ops/flash_attention.h"
#include "tests/ch09_advanced/attention_choice_run.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::random_normal;

TEST(AttentionChoiceCuda, FlashFunctionInBf16MatchesTheCoreAttention) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const int n_head = 2;
  Rng rng(31);
  const Tensor qkv = random_normal({1, 80, 3 * 64}, rng), dout = random_normal({1, 80, 64}, rng);
  const test::AttentionRun reference = test::run_attention_function(ag::attention, qkv, dout, n_head, Device::cpu());
  ModelOptions options;
  ch09::use_attention(options, ch09::Attention::Flash, DType::BF16);
  const test::AttentionRun flash = test::run_attention_function(options.attention, qkv, dout, n_head, Device::cuda());
  // bf16 operands (8 significant bits) on the tensor cores, fp32 sums; the gradients rounded to bf16 once more.
  EXPECT_LT(test::max_scaled_error(flash.out, reference.out), 3e-2);
  EXPECT_LT(test::max_scaled_error(flash.dqkv, reference.dqkv), 3e-2);
}

TEST(AttentionChoiceCuda, BatchedFunctionInBf16MatchesTheCoreAttention) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const int n_head = 2;
  Rng rng(33);
  const Tensor qkv = random_normal({2, 70, 3 * 64}, rng), dout = random_normal({2, 70, 64}, rng);
  const test::AttentionRun reference = test::run_attention_function(ag::attention, qkv, dout, n_head, Device::cpu());
  ModelOptions options;
  ch09::use_attention(options, ch09::Attention::Batched, DType::BF16);
  const test::AttentionRun batched = test::run_attention_function(options.attention, qkv, dout, n_head, Device::cuda());
  // bf16 operands on cuBLASLt's tensor cores, fp32 sums; the probabilities and gradients rounded to bf16.
  EXPECT_LT(test::max_scaled_error(batched.out, reference.out), 3e-2);
  EXPECT_LT(test::max_scaled_error(batched.dqkv, reference.dqkv), 3e-2);
}

TEST(AttentionChoiceCuda, ATinyGpt2InBf16TrainsWithFlashAsWithMaterialisedAttention) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const test::TrainingRun materialized =
      test::train_tiny_gpt2(ch09::Attention::Materialized, DType::BF16, Device::cuda(), 3);
  const test::TrainingRun flash = test::train_tiny_gpt2(ch09::Attention::Flash, DType::BF16, Device::cuda(), 3);
  ASSERT_EQ(flash.losses.size(), materialized.losses.size());
  for (size_t s = 0; s < flash.losses.size(); ++s)
    EXPECT_NEAR(flash.losses[s], materialized.losses[s], 2e-2) << "step " << s;
  EXPECT_LT(flash.activation_peak, materialized.activation_peak);
}

// The one-pass backward (dQ by atomics) against the two passes: the same model, 3 bf16 steps; dQ's sums differ in
// order and rounding only.
TEST(AttentionChoiceCuda, ATinyGpt2InBf16TrainsWithFlashOnePassAsWithFlash) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const test::TrainingRun flash = test::train_tiny_gpt2(ch09::Attention::Flash, DType::BF16, Device::cuda(), 3);
  const test::TrainingRun one_pass =
      test::train_tiny_gpt2(ch09::Attention::FlashOnePass, DType::BF16, Device::cuda(), 3);
  ASSERT_EQ(one_pass.losses.size(), flash.losses.size());
  for (size_t s = 0; s < flash.losses.size(); ++s)
    EXPECT_NEAR(one_pass.losses[s], flash.losses[s], 1e-2) << "step " << s;
  EXPECT_LT(one_pass.losses.back(), one_pass.losses.front());
}

// --attention flash-tuned: the fastest of flash attention's kernel sets on this GPU, which give flash's bits: the same
// model, 3 bf16 steps, the same losses bit for bit; the tiny model's heads of 16 have sets to choose from, so its
// first step timed them and reports the choice for its shape.
TEST(AttentionChoiceCuda, ATinyGpt2InBf16TrainsWithFlashTunedAsWithFlashBitForBit) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const test::TrainingRun flash = test::train_tiny_gpt2(ch09::Attention::Flash, DType::BF16, Device::cuda(), 3);
  const test::TrainingRun tuned = test::train_tiny_gpt2(ch09::Attention::FlashTuned, DType::BF16, Device::cuda(), 3);
  EXPECT_EQ(tuned.losses, flash.losses);
  const std::vector<std::string> choices = ops::flash_tile_choices();
  const auto timed = [&](const std::string& pass) {
    return std::any_of(choices.begin(), choices.end(),
                       [&](const std::string& line) { return line.rfind("flash " + pass + " bf16 ", 0) == 0; });
  };
  EXPECT_TRUE(timed("forward") && timed("backward")) << choices.size() << " choices reported";
}

}  // namespace
}  // namespace lab
