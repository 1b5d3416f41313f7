// The optimizer-in-backward step against the ordinary step: the same losses, norms and weights after three
// steps (also with bf16 matmuls, whose 16-bit weight copy the updates write); its gradient peak is the tied embedding
// and one backward step's tensors, not the whole model; and the combinations it cannot do (clipping, accumulation, fp16
// loss scaling) are refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "ch07_memory/optimizer_in_backward.h"
#include "common/core/memory.h"
#include "tests/ch07_memory/step_fixture.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::small_step_config;
using testing::step_test_adamw;
using testing::step_test_batch;
using testing::step_test_config;

constexpr int64_t kRows = 4, kSeq = 16;
constexpr double kLr = 3e-3;

// Runs `steps` steps of `step` on the fixture's batches; returns the losses and norms, one pair per step.
std::vector<std::pair<double, double>> train(TrainStep& step, int steps) {
  std::vector<std::pair<double, double>> out;
  for (int s = 0; s < steps; ++s) {
    const TrainStepResult r = step.run([s] { return step_test_batch(s, 0, kRows, 0, kRows, kSeq); }, kLr);
    out.push_back({r.loss, r.grad_norm});
  }
  return out;
}

int64_t bytes_of(const ParamInfo& p) {
  return p.numel() * static_cast<int64_t>(sizeof(float));
}

TEST(OptimizerInBackward, SameWeightsAsTheOrdinaryStepAfterThreeSteps) {
  GPT2 reference(small_step_config(), Device::cpu()), model(small_step_config(), Device::cpu());
  reference.init_weights(7);
  model.init_weights(7);
  const Tensor initial = model.parameters().params().clone();
  AdamW reference_adamw(reference.parameters(), step_test_adamw()), adamw(model.parameters(), step_test_adamw());
  TrainStep ordinary(reference, reference_adamw, step_test_config(1, 0.0));
  ch07::OptimizerInBackwardStep in_backward(model, adamw, step_test_config(1, 0.0));

  const auto expected = train(ordinary, 3);
  const auto got = train(in_backward, 3);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(got[s].first, expected[s].first) << "loss of step " << s;
    EXPECT_NEAR(got[s].second, expected[s].second, 1e-6 * expected[s].second) << "gradient norm of step " << s;
  }
  EXPECT_EQ(adamw.steps_taken(), 3);
  const std::vector<float> want = reference.parameters().params().to_floats();
  const std::vector<float> have = model.parameters().params().to_floats();
  const std::vector<float> start = initial.to_floats();
  ASSERT_EQ(have.size(), want.size());
  int64_t moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(have[i], want[i]) << "element " << i << " of the flat parameters";
    moved += have[i] != start[i];
  }
  EXPECT_GT(moved, static_cast<int64_t>(want.size()) / 2) << "the updates must have changed most weights";
  for (const ParamInfo& p : model.parameters().infos()) {
    const std::vector<float> m = adamw.m(p.name).to_floats(), m_ref = reference_adamw.m(p.name).to_floats();
    ASSERT_EQ(m, m_ref) << "first moment of " << p.name;
  }
}

// With bf16 matmuls the updates in backward also round each parameter into the model's 16-bit copy (the step
// refreshes nothing after them), so the next step's forward reads the updated weights: the ordinary step's losses,
// and a copy equal to the masters rounded.
TEST(OptimizerInBackward, Bf16MatmulsReadTheUpdatedCopy) {
  GPT2 reference(small_step_config(), Device::cpu()), model(small_step_config(), Device::cpu());
  reference.init_weights(7);
  model.init_weights(7);
  reference.set_matmul_dtype(DType::BF16);
  model.set_matmul_dtype(DType::BF16);
  AdamW reference_adamw(reference.parameters(), step_test_adamw()), adamw(model.parameters(), step_test_adamw());
  TrainStep ordinary(reference, reference_adamw, step_test_config(1, 0.0));
  ch07::OptimizerInBackwardStep in_backward(model, adamw, step_test_config(1, 0.0));
  const auto expected = train(ordinary, 3);
  const auto got = train(in_backward, 3);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(got[s].first, expected[s].first) << "loss of step " << s;
  const std::vector<float> written = model.params_16bit().to_floats();
  model.refresh_matmul_weights();
  EXPECT_EQ(written, model.params_16bit().to_floats());
}

TEST(OptimizerInBackward, GradientPeakIsTheTiedEmbeddingAndOneBackwardStepNotTheModel) {
  GPT2 model(small_step_config(), Device::cpu());
  model.init_weights(3);
  AdamW adamw(model.parameters(), step_test_adamw());
  const int64_t flat_grad_bytes = model.parameters().numel() * static_cast<int64_t>(sizeof(float));
  ch07::OptimizerInBackwardStep step(model, adamw, step_test_config(1, 0.0));
  EXPECT_FALSE(model.parameters().grads().defined()) << "the flat gradient buffer must be released";

  // The tied embedding's gradient lives through the whole backward; beside it, one backward step adds to at
  // most a weight and a bias.
  int64_t wte = 0, largest_other = 0, largest_vector = 0;
  for (const ParamInfo& p : model.parameters().infos()) {
    if (p.name == "wte.weight")
      wte = bytes_of(p);
    else if (p.shape.size() == 1)
      largest_vector = std::max(largest_vector, bytes_of(p));
    else
      largest_other = std::max(largest_other, bytes_of(p));
  }
  const int64_t bound = wte + largest_other + largest_vector;
  ASSERT_LT(bound, flat_grad_bytes / 2) << "the model must be large enough beside one tensor for the test to mean much";

  allocator_for(Device::cpu()).reset_peak();
  train(step, 1);
  const MemoryStats stats = memory_stats(Device::cpu());
  EXPECT_LE(stats.peak_of(MemCategory::Grads), bound);
  EXPECT_GE(stats.peak_of(MemCategory::Grads), wte + largest_other);
  EXPECT_EQ(stats.live_of(MemCategory::Grads), 0) << "every gradient is released after its update";
}

TEST(OptimizerInBackward, RefusesLossScaling) {
  GPT2 model(small_step_config(), Device::cpu());
  AdamW adamw(model.parameters(), step_test_adamw());
  ch07::OptimizerInBackwardStep step(model, adamw, step_test_config(1, 0.0));
  step.set_loss_scaling(LossScalerConfig{});
  expect_error([&] { train(step, 1); }, ErrorKind::InvalidArgument, {"--optimizer-in-backward", "loss scaling"});
}

TEST(OptimizerInBackward, RefusesClippingAndAccumulation) {
  GPT2 model(small_step_config(), Device::cpu());
  AdamW adamw(model.parameters(), step_test_adamw());
  expect_error([&] { ch07::OptimizerInBackwardStep step(model, adamw, step_test_config(1, 1.0)); },
               ErrorKind::InvalidArgument, {"--optimizer-in-backward", "--grad-clip 0"});
  expect_error([&] { ch07::OptimizerInBackwardStep step(model, adamw, step_test_config(2, 0.0)); },
               ErrorKind::InvalidArgument, {"--optimizer-in-backward", "accumulation"});
}

}  // namespace
}  // namespace lab
