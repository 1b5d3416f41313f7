// The shared training step and loop: the step does what the textbook step does (bit for bit), accumulation
// over micro-batches matches one large batch, the seams are called in their order and an override changes
// only its part, phases and data time are timed apart, and the loop follows the schedule, stops on request and
// refuses a diverged loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/autograd/tape.h"
#include "common/core/step_profile.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/math_mode.h"
#include "common/train/train_step.h"
#include "common/train/training_loop.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

constexpr int64_t kB = 4, kT = 16;
constexpr int kVocab = 1000;

// The "tiny" GPT-2 with a small vocabulary (the step does not care, and the tests run in a fraction of the time).
GPT2Config tiny_config() {
  return test::tiny_gpt2_config(kVocab);
}

// A tiny GPT-2 with its optimizer, and random token batches.
struct TinyRun {
  GPT2 model{tiny_config(), Device::cpu()};
  AdamW optimizer{model.parameters(), AdamWConfig{}};
  Rng rng{5};

  TinyRun() { model.init_weights(3); }

  MicroBatch random_batch(int64_t rows) {
    std::vector<int32_t> tok(static_cast<size_t>(rows * kT)), tgt(tok.size());
    for (auto& x : tok) x = static_cast<int32_t>(rng.below(kVocab));
    for (auto& x : tgt) x = static_cast<int32_t>(rng.below(kVocab));
    return {Tensor::from_ints(tok, {rows, kT}), Tensor::from_ints(tgt, {rows, kT})};
  }
};

std::vector<float> weights(const GPT2& model) {
  return model.parameters().params().to_floats();
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

TEST(TrainStep, IsTheTextbookStepBitForBit) {
  TinyRun by_hand, shared;
  const MicroBatch batch = by_hand.random_batch(kB);
  for (int i = 0; i < 2; ++i) {
    by_hand.model.parameters().zero_grad();
    Tape tape;
    const Tensor losses = by_hand.model.loss(tape, batch.inputs, batch.targets);
    tape.backward();
    const double norm = global_grad_norm(by_hand.model.parameters());
    by_hand.optimizer.step(1e-3f, clip_coefficient(norm, 0.5));

    TrainStep step(shared.model, shared.optimizer, {1, 0.5, false});
    const TrainStepResult r = step.run([&] { return batch; }, 1e-3);
    EXPECT_EQ(r.grad_norm, static_cast<double>(static_cast<float>(norm)));  // the step's scalars are f32
    EXPECT_NEAR(r.loss, std::log(static_cast<double>(kVocab)), 1.0);        // a fresh model guesses about uniformly
    EXPECT_DOUBLE_EQ(r.lr, 1e-3);
  }
  EXPECT_EQ(weights(shared.model), weights(by_hand.model));
}

TEST(TrainStep, EnqueueThenReportIsRunAndReadsNoReductionBack) {
  // enqueue() leaves the loss, the norm and the gradient scale on the device: its ops are the reductions into
  // device memory, never the ones that return to the host; report() then gives what run() gives.
  TinyRun a, b;
  const MicroBatch batch = a.random_batch(kB);
  TrainStep ran(a.model, a.optimizer, {2, 0.5, false});
  TrainStep enqueued(b.model, b.optimizer, {2, 0.5, false});
  for (int i = 0; i < 2; ++i) {
    const TrainStepResult r = ran.run([&] { return batch; }, 1e-3);
    StepProfile profile;
    enqueued.enqueue([&] { return batch; }, 1e-3);
    profile.close();
    const TrainStepResult e = enqueued.report();
    EXPECT_EQ(e.loss, r.loss);
    EXPECT_EQ(e.grad_norm, r.grad_norm);
    std::vector<std::string> ops;
    for (const ProfileRow& row : profile.rows(ProfileKind::Op)) ops.push_back(row.name);
    for (const char* host_reduction : {"sum", "sum_squares"})
      EXPECT_EQ(std::count(ops.begin(), ops.end(), host_reduction), 0) << host_reduction << " ran in enqueue()";
    for (const char* device_reduction : {"accumulate_sum", "gradient_norm_and_scale"})
      EXPECT_EQ(std::count(ops.begin(), ops.end(), device_reduction), 1) << device_reduction;
  }
  EXPECT_EQ(weights(b.model), weights(a.model));
}

TEST(TrainStep, AccumulatingMicroBatchesMatchesOneLargeBatch) {
  TinyRun large, accumulated;
  const MicroBatch whole = large.random_batch(kB);
  const MicroBatch halves[2] = {{whole.inputs.slice_rows(0, kB / 2), whole.targets.slice_rows(0, kB / 2)},
                                {whole.inputs.slice_rows(kB / 2, kB), whole.targets.slice_rows(kB / 2, kB)}};
  TrainStep one(large.model, large.optimizer, {1, 1.0, false});
  TrainStep two(accumulated.model, accumulated.optimizer, {2, 1.0, false});
  const TrainStepResult a = one.run([&] { return whole; }, 1e-3);
  int next = 0;
  const TrainStepResult b = two.run([&] { return halves[next++]; }, 1e-3);
  EXPECT_EQ(next, 2);
  EXPECT_NEAR(b.loss, a.loss, 1e-5 * a.loss);
  EXPECT_NEAR(b.grad_norm, a.grad_norm, 1e-4 * a.grad_norm);
  // The same update to rounding: far below the update itself (lr 1e-3 per element).
  EXPECT_LT(max_abs_difference(weights(accumulated.model), weights(large.model)), 1e-5);
  EXPECT_GT(max_abs_difference(weights(large.model), weights(TinyRun().model)), 1e-4);  // the step did move them
}

// Records the order of the parts, and replaces gradient reduction with something visible: zeroing the
// gradients, as if every other rank had sent the negation.
class RecordingStep : public TrainStep {
 public:
  using TrainStep::TrainStep;
  std::vector<std::string> calls;

 protected:
  void zero_grads() override {
    calls.push_back("zero_grads");
    TrainStep::zero_grads();
  }
  void forward_backward(const MicroBatch& batch, TrainStepResult& result) override {
    calls.push_back("forward_backward");
    TrainStep::forward_backward(batch, result);
  }
  void reduce_gradients() override {
    calls.push_back("reduce_gradients");
    model().parameters().grads().zero_();
  }
  void compute_gradient_norm() override {
    calls.push_back("compute_gradient_norm");
    TrainStep::compute_gradient_norm();
  }
  void optimizer_step(double lr) override {
    calls.push_back("optimizer_step");
    TrainStep::optimizer_step(lr);
  }
};

TEST(TrainStep, ThePartsRunInOrderAndAnOverrideChangesOnlyItsPart) {
  TinyRun s;
  const MicroBatch batch = s.random_batch(kB);
  RecordingStep step(s.model, s.optimizer, {3, 1.0, false});
  const TrainStepResult r = step.run([&] { return batch; }, 1e-3);
  EXPECT_EQ(step.calls,
            (std::vector<std::string>{"zero_grads", "forward_backward", "forward_backward", "forward_backward",
                                      "reduce_gradients", "compute_gradient_norm", "optimizer_step"}));
  EXPECT_EQ(r.grad_norm, 0.0);  // the norm saw the reduced (zeroed) gradients
  EXPECT_TRUE(std::isfinite(r.loss));
}

TEST(TrainStep, PhasesAreTimedApartFromData) {
  TinyRun s;
  const MicroBatch batch = s.random_batch(kB);
  const BatchSource slow = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return batch;
  };
  TrainStep timed(s.model, s.optimizer, {2, 1.0, true});
  const TrainStepResult r = timed.run(slow, 1e-3);
  EXPECT_GE(r.data_seconds, 0.060);
  EXPECT_GT(r.forward_seconds, 0.0);
  EXPECT_GT(r.backward_seconds, 0.0);
  EXPECT_GT(r.optimizer_seconds, 0.0);
  // Data time is in no phase, and the step's time holds them all.
  EXPECT_LE(r.forward_seconds + r.backward_seconds + r.optimizer_seconds + r.data_seconds, r.seconds);

  TrainStep untimed(s.model, s.optimizer, {1, 1.0, false});
  const TrainStepResult u = untimed.run([&] { return batch; }, 1e-3);
  EXPECT_EQ(u.forward_seconds + u.backward_seconds + u.optimizer_seconds, 0.0);
  EXPECT_GT(u.seconds, 0.0);
}

TEST(TrainStep, BadConfigurationsAreRefused) {
  TinyRun s;
  testing::expect_error(
      [&] {
        TrainStep(s.model, s.optimizer, {0, 1.0, false});
      },
      ErrorKind::InvalidArgument, {"accum_steps"});
  testing::expect_error(
      [&] {
        TrainStep(s.model, s.optimizer, {1, -1.0, false});
      },
      ErrorKind::InvalidArgument, {"grad_clip"});
}

TEST(TrainingLoop, FollowsTheScheduleAndStopsWhenAsked) {
  TinyRun s;
  const MicroBatch batch = s.random_batch(kB);
  TrainStep step(s.model, s.optimizer, {1, 1.0, false});
  LrSchedule schedule;
  schedule.kind = LrSchedule::Kind::Linear;
  schedule.max_lr = 1e-3;
  schedule.warmup_steps = 2;
  schedule.total_steps = 10;
  TrainingLoop loop(
      step, [&] { return batch; }, schedule);

  std::vector<int64_t> steps;
  std::vector<double> lrs;
  const auto record = [&](int64_t step_index, const TrainStepResult& r) {
    steps.push_back(step_index);
    lrs.push_back(r.lr);
  };
  const TrainingLoopResult done = loop.run(1, 4, record);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(lrs, (std::vector<double>{schedule.at(1), schedule.at(2), schedule.at(3)}));
  EXPECT_EQ(done.steps, 4);
  EXPECT_FALSE(done.interrupted);
  EXPECT_TRUE(std::isfinite(done.last_loss));

  int polls = 0;
  const TrainingLoopResult stopped = loop.run(4, 10, record, [&] { return ++polls > 2; });
  EXPECT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.steps, 6);  // steps 4 and 5 ran, the third poll stopped it

  const TrainingLoopResult none = loop.run(7, 7, record);
  EXPECT_EQ(none.steps, 7);
  EXPECT_TRUE(std::isnan(none.last_loss));
}

class DivergingStep : public TrainStep {
 public:
  using TrainStep::TrainStep;

 protected:
  // A NaN loss, written where the step keeps its loss (the micro-batch computes nothing).
  void forward_backward(const MicroBatch&, TrainStepResult&) override {
    write_loss(std::numeric_limits<double>::quiet_NaN());
  }
};

TEST(TrainingLoop, ADivergedLossStopsTheRunNamingTheStep) {
  TinyRun s;
  const MicroBatch batch = s.random_batch(kB);
  DivergingStep step(s.model, s.optimizer, {1, 1.0, false});
  TrainingLoop loop(
      step, [&] { return batch; }, LrSchedule{});
  int callbacks = 0;
  testing::expect_error([&] { loop.run(11, 20, [&](int64_t, const TrainStepResult&) { ++callbacks; }); },
                        ErrorKind::Internal, {"training diverged", "nan", "at step 12"});
  EXPECT_EQ(callbacks, 0);
}

TEST(MathMode, ParsedOnceFromTheDtypeFlag) {
  EXPECT_EQ(parse_math_mode("fp32"), MathMode::FP32);
  EXPECT_EQ(parse_math_mode("tf32"), MathMode::TF32);
  EXPECT_EQ(parse_math_mode("bf16"), MathMode::BF16);
  EXPECT_EQ(parse_math_mode("fp16"), MathMode::FP16);
  testing::expect_error([] { parse_math_mode("fp8"); }, ErrorKind::InvalidArgument, {"--dtype", "'fp8'"});
  apply_math_mode(Device::cpu(), MathMode::FP32);  // nothing to switch on the CPU
  testing::expect_error([] { apply_math_mode(Device::cpu(), MathMode::TF32); }, ErrorKind::Unsupported);
}

}  // namespace
}  // namespace lab
