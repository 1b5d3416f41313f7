// Mixed precision in the training step: the dynamic loss scaler's rules; an overflow injected into one gradient
// skips exactly that step (weights, moments and AdamW's step count untouched) and halves the scale; an overflow
// in the forward pass stops the loop with a message that says so; the scale grows after its interval; scaling
// by a power of two changes nothing but the scale; the 16-bit weight copy follows the fp32 masters; and bf16 and
// fp16 training of a small model for 200 steps ends within 3% of fp32's validation loss.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/ops/reduce.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/train/train_step.h"
#include "common/train/training_loop.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"
#include "tests/common/train/loss_scaling_cases.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

// ---------------------------------------------------------------- the scaler alone

TEST(DynamicLossScaler, HalvesOnOverflowAndDoublesAfterTheInterval) {
  DynamicLossScaler scaler({1024.0, 2.0, 0.5, 3});
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
  scaler.update(false);  // resets the count of clean steps
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.state().skipped_steps, 1);
  for (int i = 0; i < 2; ++i) scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.state().clean_steps, 0);
  EXPECT_EQ(scaler.state().skipped_steps, 1);
}

TEST(DynamicLossScaler, RefusesBadSettingsAndStates) {
  EXPECT_THROW(DynamicLossScaler({0.0, 2.0, 0.5, 10}), Error);
  EXPECT_THROW(DynamicLossScaler({1.0, 1.0, 0.5, 10}), Error);
  EXPECT_THROW(DynamicLossScaler({1.0, 2.0, 1.0, 10}), Error);
  EXPECT_THROW(DynamicLossScaler({1.0, 2.0, 0.5, 0}), Error);
  DynamicLossScaler scaler;
  EXPECT_THROW(scaler.set_state({std::numeric_limits<double>::infinity(), 0, 0}), Error);
  EXPECT_THROW(scaler.set_state({8.0, -1, 0}), Error);
  scaler.set_state({8.0, 5, 2});
  EXPECT_EQ(scaler.scale(), 8.0);
  EXPECT_EQ(scaler.state().clean_steps, 5);
}

// ---------------------------------------------------------------- the scaler in the step

constexpr int kVocab = 64;

GPT2Config tiny_config() {
  return test::tiny_gpt2_config(kVocab);
}

// Token streams with structure to learn: a fixed random Markov chain in which each token is followed by one of
// four successors (one of them half the time), so the loss falls well below log(64) within 200 steps.
class MarkovText {
 public:
  explicit MarkovText(uint64_t seed) : rng_(seed) {
    Rng chain(42);  // the same chain for every stream
    for (auto& s : successors_)
      for (int32_t& next : s) next = static_cast<int32_t>(chain.below(kVocab));
  }
  MicroBatch batch(int64_t B, int64_t T) {
    std::vector<int32_t> tokens(static_cast<size_t>(B * (T + 1)));
    for (int64_t b = 0; b < B; ++b) {
      int32_t t = static_cast<int32_t>(rng_.below(kVocab));
      for (int64_t i = 0; i <= T; ++i) {
        tokens[static_cast<size_t>(b * (T + 1) + i)] = t;
        const float u = rng_.uniform();
        t = successors_[static_cast<size_t>(t)][u < 0.5f ? 0 : 1 + static_cast<size_t>(rng_.below(3))];
      }
    }
    std::vector<int32_t> inputs, targets;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < T; ++i) {
        inputs.push_back(tokens[static_cast<size_t>(b * (T + 1) + i)]);
        targets.push_back(tokens[static_cast<size_t>(b * (T + 1) + i + 1)]);
      }
    return {Tensor::from_ints(inputs, {B, T}), Tensor::from_ints(targets, {B, T})};
  }

 private:
  Rng rng_;
  std::array<std::array<int32_t, 4>, kVocab> successors_{};
};

using test::OverflowAt;

struct TinyModel {
  GPT2 model{tiny_config(), Device::cpu()};
  AdamW optimizer{model.parameters(), AdamWConfig{}};
  explicit TinyModel(DType dtype) {
    model.init_weights(3);
    model.set_matmul_dtype(dtype);
  }
};

TEST(MixedPrecisionStep, AnOverflowSkipsExactlyThatStepAndHalvesTheScale) {
  TinyModel run(DType::F16);
  MarkovText text(1);
  OverflowAt step(run.model, run.optimizer, {1, 1.0, false}, 2);
  step.set_loss_scaling(LossScalerConfig{1024.0, 2.0, 0.5, 1000});
  for (int i = 0; i < 2; ++i) {
    const TrainStepResult r = step.run([&] { return text.batch(4, 16); }, 1e-3);
    EXPECT_FALSE(r.skipped);
    EXPECT_EQ(r.loss_scale, 1024.0);
    EXPECT_TRUE(std::isfinite(r.grad_norm));
  }
  const std::vector<float> weights = run.model.parameters().params().to_floats();
  const std::vector<float> m = run.optimizer.m().to_floats(), v = run.optimizer.v().to_floats();
  const TrainStepResult overflow = step.run([&] { return text.batch(4, 16); }, 1e-3);
  EXPECT_TRUE(overflow.skipped);
  EXPECT_FALSE(std::isfinite(overflow.grad_norm));
  EXPECT_EQ(overflow.loss_scale, 1024.0);
  EXPECT_EQ(run.model.parameters().params().to_floats(), weights);
  EXPECT_EQ(run.optimizer.m().to_floats(), m);
  EXPECT_EQ(run.optimizer.v().to_floats(), v);
  EXPECT_EQ(run.optimizer.steps_taken(), 2);
  EXPECT_EQ(step.loss_scaler()->scale(), 512.0);
  EXPECT_EQ(step.loss_scaler()->state().skipped_steps, 1);

  const TrainStepResult after = step.run([&] { return text.batch(4, 16); }, 1e-3);
  EXPECT_FALSE(after.skipped);
  EXPECT_EQ(after.loss_scale, 512.0);
  EXPECT_EQ(run.optimizer.steps_taken(), 3);
  EXPECT_NE(run.model.parameters().params().to_floats(), weights);
}

// A weight beyond fp16's range becomes inf in the 16-bit copy: the forward pass overflows whatever the scale,
// and the loop says so rather than skipping steps forever or calling it a divergence.
TEST(MixedPrecisionStep, AForwardOverflowStopsTheLoopWithAMessageThatSaysSo) {
  TinyModel run(DType::F16);
  MarkovText text(3);
  const Tensor weight = run.model.parameters().value("h.0.mlp.c_fc.weight");
  weight.copy_from(Tensor::from_floats(std::vector<float>(static_cast<size_t>(weight.numel()), 1e6f), weight.shape()));
  run.model.refresh_matmul_weights();
  TrainStep step(run.model, run.optimizer, {1, 1.0, false});
  step.set_loss_scaling(LossScalerConfig{});
  LrSchedule schedule;
  schedule.kind = LrSchedule::Kind::Constant;
  TrainingLoop loop(
      step, [&] { return text.batch(4, 16); }, schedule);
  testing::expect_error([&] { loop.run(0, 3); }, ErrorKind::Internal,
                        {"fp16 overflow in the forward pass at step 1", "--dtype bf16"});
}

TEST(MixedPrecisionStep, TheScaleGrowsAfterItsInterval) {
  TinyModel run(DType::F16);
  MarkovText text(2);
  TrainStep step(run.model, run.optimizer, {1, 1.0, false});
  step.set_loss_scaling(LossScalerConfig{256.0, 2.0, 0.5, 3});
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) scales.push_back(step.run([&] { return text.batch(4, 16); }, 1e-3).loss_scale);
  EXPECT_EQ(scales, (std::vector<double>{256, 256, 256, 512, 512, 512, 1024}));
  EXPECT_EQ(step.loss_scaler()->state().skipped_steps, 0);
}

// Scaling by 2^k is exact in fp32 (short of overflow and subnormals), and the step divides it out again: with
// fp32 matmuls, a scaled step is the unscaled step bit for bit, so the unscaling is right and complete.
TEST(MixedPrecisionStep, APowerOfTwoScaleChangesNothingInFp32) {
  TinyModel plain(DType::F32), scaled(DType::F32);
  MarkovText text_a(3), text_b(3);
  TrainStep plain_step(plain.model, plain.optimizer, {2, 0.5, false});
  TrainStep scaled_step(scaled.model, scaled.optimizer, {2, 0.5, false});
  scaled_step.set_loss_scaling(LossScalerConfig{4096.0, 2.0, 0.5, 1000});
  for (int i = 0; i < 3; ++i) {
    const TrainStepResult a = plain_step.run([&] { return text_a.batch(4, 16); }, 1e-3);
    const TrainStepResult b = scaled_step.run([&] { return text_b.batch(4, 16); }, 1e-3);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.grad_norm, b.grad_norm);
  }
  EXPECT_EQ(plain.model.parameters().params().to_floats(), scaled.model.parameters().params().to_floats());
}

double mean_loss(const GPT2& model, const MicroBatch& batch) {
  Tape tape(false);
  const Tensor losses = model.loss(tape, batch.inputs, batch.targets);
  return ops::sum(losses) / static_cast<double>(losses.numel());
}

// The 16-bit copy the matmuls read is the fp32 masters rounded, after every step: the stepped model computes what
// a fresh model made from its masters computes.
TEST(MixedPrecisionStep, TheWeightCopyFollowsTheMasters) {
  TinyModel run(DType::BF16);
  MarkovText text(4);
  TrainStep step(run.model, run.optimizer, {1, 1.0, false});
  for (int i = 0; i < 2; ++i) step.run([&] { return text.batch(4, 16); }, 1e-2);
  GPT2 fresh(tiny_config(), Device::cpu());
  fresh.parameters().params().copy_from(run.model.parameters().params());
  fresh.set_matmul_dtype(DType::BF16);
  const MicroBatch batch = MarkovText(9).batch(2, 16);
  EXPECT_EQ(mean_loss(run.model, batch), mean_loss(fresh, batch));
}

// ---------------------------------------------------------------- training

// 200 steps of the tiny model (2 layers, 64 channels) on the Markov text, batches of 4 x 32, then the mean loss
// over 8 validation batches of another stream.
double validation_loss_after_training(DType dtype) {
  TinyModel run(dtype);
  MarkovText train(10), val(20);
  TrainStep step(run.model, run.optimizer, {1, 1.0, false});
  if (dtype == DType::F16) step.set_loss_scaling(LossScalerConfig{});
  for (int i = 0; i < 200; ++i) step.run([&] { return train.batch(4, 32); }, 3e-3);
  double total = 0;
  for (int i = 0; i < 8; ++i) total += mean_loss(run.model, val.batch(8, 32));
  return total / 8;
}

TEST(MixedPrecisionTraining, Bf16AndFp16EndWithinThreePercentOfFp32) {
  const double fp32 = validation_loss_after_training(DType::F32);
  EXPECT_LT(fp32, 0.75 * std::log(static_cast<double>(kVocab)));  // it learned something to compare
  for (const DType dtype : {DType::BF16, DType::F16}) {
    const double low = validation_loss_after_training(dtype);
    std::printf("validation loss after 200 steps: fp32 %.4f, %s %.4f\n", fp32, dtype_name(dtype), low);
    EXPECT_NEAR(low, fp32, 0.03 * fp32) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace lab
