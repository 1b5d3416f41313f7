// --cuda-graphs (ch09_advanced/graphed_step.h), label cuda: runs in the emulation build, whose stream capture
// refuses what CUDA refuses, and skips without a GPU.
// - A tiny GPT-2 trained by replays of a captured step gets the eager step's losses, gradient norms and weights
//   bit for bit, with the learning rate changing every step (it reaches the replays through device memory), in
//   fp32, in bf16 with fused kernels, flash attention and two accumulated micro-batches, and in fp16 with a loss
//   scale that overflows at first (the skips, the backoff and the growth happen on the device, in the replays too).
// - The capture and the replays allocate no device memory (the pool holds what the warm-up step allocated).
// - Steps that cannot be captured are refused with their reason; a step that synchronises during the capture
//   fails with one error that says the capture failed; a micro-batch of another shape is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ch06_single_gpu/fused_model.h"
#include "ch09_advanced/attention_choice.h"
#include "ch09_advanced/graphed_step.h"
#include "common/core/memory.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/train/math_mode.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

struct Setup {
  MathMode math = MathMode::FP32;
  bool fused_flash = false;  // chapter 6's fused kernels and flash attention
  int64_t accum_steps = 1;
  std::optional<LossScalerConfig> loss_scaling;  // fp16: replaces the default scaler
};

// A tiny GPT-2 with its optimizer and step, on the GPU.
struct Training {
  explicit Training(const Setup& setup, TrainStepConfig config = {})
      : model(test::tiny_gpt2_config(97, 2, 4, 64, 64), Device::cuda(), options(setup)),
        optimizer(model.parameters(), AdamWConfig{}),
        step(model, optimizer, with_accumulation(config, setup.accum_steps)) {
    model.init_weights(5);
    apply_math_mode(setup.math, step);
    if (setup.loss_scaling) step.set_loss_scaling(setup.loss_scaling);
  }
  static ModelOptions options(const Setup& setup) {
    ModelOptions o;
    if (setup.fused_flash) {
      o = ch06::with_kernels(o, ch06::Kernels::Fused);
      ch09::use_attention(o, ch09::Attention::Flash, matmul_dtype(setup.math));
    }
    return o;
  }
  static TrainStepConfig with_accumulation(TrainStepConfig config, int64_t accum_steps) {
    config.accum_steps = accum_steps;
    return config;
  }
  GPT2 model;
  AdamW optimizer;
  TrainStep step;
};

// A different random batch at every call, the same sequence for every source made with the same seed. The input
// tokens of a batch are distinct: the embedding's backward adds the rows of a repeated token with atomics, in an
// order that changes from run to run (two eager runs differ in the last bits too), so only distinct tokens make
// the runs comparable bit for bit.
BatchSource random_batches(uint64_t seed, int64_t batch, int64_t seq) {
  auto rng = std::make_shared<Rng>(seed);
  return [rng, batch, seq] {
    std::vector<int32_t> ids(97);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    for (size_t i = ids.size() - 1; i > 0; --i) std::swap(ids[i], ids[rng->below(i + 1)]);
    ids.resize(static_cast<size_t>(batch * seq));
    return MicroBatch{Tensor::from_ints(ids, {batch, seq}, Device::cuda()),
                      test::random_ids({batch, seq}, *rng, 97).to(Device::cuda())};
  };
}

double lr_at(int step) {
  return 1e-3 * (1.0 + 0.5 * step);  // a new value every step: a frozen learning rate would show
}

struct Trajectory {
  std::vector<double> losses, norms, loss_scales;
  std::vector<bool> skipped;
  std::vector<float> weights;
  int64_t optimizer_steps = 0;
};

template <typename RunStep>
Trajectory train(Training& t, int steps, RunStep&& run_step) {
  const BatchSource batches = random_batches(3, 2, 40);
  Trajectory out;
  for (int s = 0; s < steps; ++s) {
    const TrainStepResult r = run_step(batches, lr_at(s));
    EXPECT_EQ(r.lr, lr_at(s));
    out.losses.push_back(r.loss);
    out.norms.push_back(r.grad_norm);
    out.loss_scales.push_back(r.loss_scale);
    out.skipped.push_back(r.skipped);
  }
  out.weights = t.model.parameters().params().to_floats();
  out.optimizer_steps = t.optimizer.steps_taken();
  return out;
}

// Equal, element by element, counting NaN equal to NaN.
bool same_numbers(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// The eager steps' trajectory, after checking the replays' against it.
Trajectory expect_replays_match_the_eager_steps(const Setup& setup, int steps = 5) {
  Training eager(setup), graphed(setup);
  const Trajectory want = train(eager, steps, [&](const BatchSource& b, double lr) { return eager.step.run(b, lr); });
  ch09::GraphedStep replayed(graphed.step);
  const Trajectory got = train(graphed, steps, [&](const BatchSource& b, double lr) { return replayed.run(b, lr); });
  EXPECT_TRUE(replayed.captured());
  EXPECT_EQ(replayed.replays(), steps - 1);  // one eager warm-up step, then the capture's step and the replays
  EXPECT_EQ(got.losses, want.losses);
  // A skipped step's norm is NaN in both (inf minus inf in the clipping), which == does not call equal.
  EXPECT_TRUE(same_numbers(got.norms, want.norms)) << "the gradient norms differ";
  EXPECT_EQ(got.loss_scales, want.loss_scales);
  EXPECT_EQ(got.skipped, want.skipped);
  EXPECT_EQ(got.optimizer_steps, want.optimizer_steps);
  const auto skips = std::count(want.skipped.begin(), want.skipped.end(), true);
  EXPECT_EQ(want.optimizer_steps, steps - skips);  // a skipped update is no AdamW step
  EXPECT_EQ(got.weights.size(), want.weights.size());
  EXPECT_TRUE(got.weights == want.weights) << "the weights differ after " << steps << " steps";
  for (size_t s = 1; s < got.losses.size(); ++s) EXPECT_NE(got.losses[s], got.losses[s - 1]) << "step " << s;
  return want;
}

TEST(GraphedStep, ReplaysTrainAsTheEagerStepBitForBitInFp32) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  expect_replays_match_the_eager_steps({MathMode::FP32, false, 1, std::nullopt});
}

TEST(GraphedStep, ReplaysTrainAsTheEagerStepBitForBitInBf16WithFusedKernelsFlashAttentionAndAccumulation) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  expect_replays_match_the_eager_steps({MathMode::BF16, true, 2, std::nullopt});
}

// 2^24 overflows fp16 in this model's backward: the first steps are skipped and the scale halves until one fits, then
// grows after every 2 clean steps, and overflows again; the replays do all of it as the eager steps do.
TEST(GraphedStep, ReplaysTrainAsTheEagerStepBitForBitInFp16WithOverflowsSkippedOnTheDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  const Trajectory want =
      expect_replays_match_the_eager_steps({MathMode::FP16, false, 1, LossScalerConfig{16777216.0, 2.0, 0.5, 2}}, 8);
  const auto skips = std::count(want.skipped.begin(), want.skipped.end(), true);
  EXPECT_GE(skips, 1) << "no step overflowed: the test does not exercise the skip";
  EXPECT_LT(skips, 8) << "every step overflowed: the test does not exercise the update";
  EXPECT_LT(want.loss_scales.back(), want.loss_scales.front());
}

TEST(GraphedStep, TheCaptureAndTheReplaysAllocateNoDeviceMemory) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  Training t({MathMode::BF16, true, 1, std::nullopt});
  ch09::GraphedStep replayed(t.step);
  const BatchSource batches = random_batches(4, 2, 40);
  replayed.run(batches, 1e-3);  // the warm-up step fills the pool
  const int64_t mallocs = memory_stats(Device::cuda()).system_allocs;
  for (int s = 0; s < 3; ++s) replayed.run(batches, 1e-3);
  EXPECT_EQ(replayed.replays(), 3);
  EXPECT_EQ(memory_stats(Device::cuda()).system_allocs, mallocs);
}

TEST(GraphedStep, StepsThatCannotBeCapturedAreRefusedWithTheReason) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  Training timed({MathMode::FP32, false, 1, std::nullopt}, TrainStepConfig{1, 1.0, /*time_phases=*/true});
  testing::expect_error([&] { ch09::GraphedStep g(timed.step); }, ErrorKind::InvalidArgument,
                        {"--cuda-graphs: ", "timing the phases"});
  GPT2 on_cpu(test::tiny_gpt2_config(97, 2, 4, 64, 64), Device::cpu());
  on_cpu.init_weights(1);
  AdamW optimizer(on_cpu.parameters(), AdamWConfig{});
  TrainStep cpu_step(on_cpu, optimizer, TrainStepConfig{});
  testing::expect_error([&] { ch09::GraphedStep g(cpu_step); }, ErrorKind::InvalidArgument, {"on the CPU"});
}

// A step that reads a value back in the middle, as a careless override might: capture_blocker() does not know.
class ReadingBackStep : public TrainStep {
 public:
  using TrainStep::TrainStep;

 protected:
  void forward_backward(const MicroBatch& batch, TrainStepResult& result) override {
    TrainStep::forward_backward(batch, result);
    (void)loss_sum().item();  // a synchronous copy to the host
  }
};

TEST(GraphedStep, AStepThatSynchronisesDuringTheCaptureFailsWithOneClearError) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  GPT2 model(test::tiny_gpt2_config(97, 2, 4, 64, 64), Device::cuda());
  model.init_weights(1);
  AdamW optimizer(model.parameters(), AdamWConfig{});
  ReadingBackStep step(model, optimizer, TrainStepConfig{});
  ch09::GraphedStep replayed(step);
  const BatchSource batches = random_batches(5, 2, 40);
  replayed.run(batches, 1e-3);  // eagerly: reading back is allowed
  testing::expect_error([&] { replayed.run(batches, 1e-3); }, ErrorKind::Cuda, {"CUDA graph capture"});
  EXPECT_FALSE(replayed.captured());
}

TEST(GraphedStep, AMicroBatchOfAnotherShapeIsRefused) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  Training t({MathMode::FP32, false, 1, std::nullopt});
  ch09::GraphedStep replayed(t.step);
  replayed.run(random_batches(6, 2, 40), 1e-3);
  testing::expect_error([&] { replayed.run(random_batches(6, 2, 41), 1e-3); }, ErrorKind::InvalidArgument,
                        {"[2, 41]", "after [2, 40]", "captured with"});
}

}  // namespace
}  // namespace lab
