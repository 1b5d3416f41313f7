// Rung 1 of the memory staircase, gradient accumulation (TrainStepConfig::accum_steps, the trainer's
// --total-batch-tokens): the gradients of 4 micro-batches of 2 rows accumulated equal those of the one batch of
// 8 rows (fp32 tolerance: the sums are grouped differently), and so does the AdamW update of a whole step.
#include <gtest/gtest.h>

#include <cmath>

#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

constexpr int64_t kRows = 8, kMicro = 4, kSeq = 16;

struct Batch {
  Tensor inputs, targets;  // [kRows, kSeq]
};

Batch random_batch(const GPT2Config& config) {
  Rng rng(21);
  return {test::random_ids({kRows, kSeq}, rng, config.vocab_size),
          test::random_ids({kRows, kSeq}, rng, config.vocab_size)};
}

std::unique_ptr<GPT2> new_model(const GPT2Config& config) {
  auto model = std::make_unique<GPT2>(config, Device::cpu());
  model->init_weights(3);
  return model;
}

TEST(GradientAccumulation, FourMicroBatchesGiveTheGradientsOfTheLargeBatch) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  const Batch b = random_batch(config);
  auto large = new_model(config), accumulated = new_model(config);
  large->parameters().zero_grad();
  {
    Tape tape;
    large->loss(tape, b.inputs, b.targets);
    tape.backward();
  }
  accumulated->parameters().zero_grad();
  const int64_t rows = kRows / kMicro;
  for (int64_t m = 0; m < kMicro; ++m) {
    Tape tape;
    accumulated->loss(tape, b.inputs.slice_rows(m * rows, (m + 1) * rows),
                      b.targets.slice_rows(m * rows, (m + 1) * rows), 1.0f / kMicro);
    tape.backward();
  }
  EXPECT_LT(
      test::max_scaled_error(accumulated->parameters().grads().to_floats(), large->parameters().grads().to_floats()),
      1e-5);
}

TEST(GradientAccumulation, AStepOfFourMicroBatchesGivesTheUpdateOfTheLargeBatch) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  const Batch b = random_batch(config);
  auto large = new_model(config), accumulated = new_model(config);
  AdamW large_opt(large->parameters(), {}), accumulated_opt(accumulated->parameters(), {});
  TrainStep large_step(*large, large_opt, TrainStepConfig{1, 1.0, false});
  TrainStep accumulated_step(*accumulated, accumulated_opt, TrainStepConfig{kMicro, 1.0, false});
  int64_t next = 0;
  const BatchSource micro = [&] {
    const int64_t rows = kRows / kMicro, m = next++ % kMicro;
    return MicroBatch{b.inputs.slice_rows(m * rows, (m + 1) * rows), b.targets.slice_rows(m * rows, (m + 1) * rows)};
  };
  const BatchSource whole = [&] { return MicroBatch{b.inputs, b.targets}; };
  for (int step = 0; step < 2; ++step) {
    const TrainStepResult l = large_step.run(whole, 1e-3);
    const TrainStepResult a = accumulated_step.run(micro, 1e-3);
    EXPECT_NEAR(a.loss, l.loss, 1e-5 * std::abs(l.loss));
    EXPECT_NEAR(a.grad_norm, l.grad_norm, 1e-5 * l.grad_norm);
  }
  // Adam divides by sqrt(v): a gradient near zero can move by up to lr either way, so weights are compared on lr.
  EXPECT_LT(
      test::max_abs_error(accumulated->parameters().params().to_floats(), large->parameters().params().to_floats()),
      1e-5);
}

}  // namespace
}  // namespace lab
