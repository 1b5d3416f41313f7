#include "tests/common/train/activations_16bit_cases.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/autograd/functions.h"
#include "common/core/memory.h"
#include "common/core/step_profile.h"
#include "common/nn/gpt2.h"
#include "common/ops/batched_attention.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

// The attention functions by name, in `storage` (the model's matmul dtype), as chapter 9 installs them.
ModelOptions::AttentionFn attention_named(const std::string& name, DType storage) {
  if (name == "flash")
    return
        [storage](Tape& tape, const Var& qkv, int n_head) { return ag::flash_attention(tape, qkv, n_head, storage); };
  if (name == "batched")
    return
        [storage](Tape& tape, const Var& qkv, int n_head) { return ag::batched_attention(tape, qkv, n_head, storage); };
  return ag::attention;
}

// A tiny GPT-2 (4 heads of 16, sequences of 70 tokens: over one 64-row attention tile) with `dtype` matmuls and
// activations in `activations`, weights from seed 5.
GPT2 tiny_model(DType dtype, DType activations, Device device, const std::string& attention = "flash") {
  ModelOptions options;
  options.attention = attention_named(attention, dtype);
  options.activations = activations;
  GPT2 model(tiny_gpt2_config(97, 2, 4, 64, 80), device, options);
  model.init_weights(5);
  model.set_matmul_dtype(dtype);
  return model;
}

struct Batch {
  Tensor tokens, targets;
};

Batch random_batch(Device device, uint64_t seed) {
  Rng rng(seed);
  return {random_ids({2, 70}, rng, 97).to(device), random_ids({2, 70}, rng, 97).to(device)};
}

struct Pass {
  double loss = 0;
  std::vector<float> grads;
};

Pass forward_backward(GPT2& model, const Batch& batch) {
  model.parameters().zero_grad();
  Tape tape;
  const std::vector<float> losses = model.loss(tape, batch.tokens, batch.targets).to_floats();
  tape.backward();
  Pass pass;
  for (float l : losses) pass.loss += l;
  pass.loss /= static_cast<double>(losses.size());
  pass.grads = model.parameters().grads().to_floats();
  return pass;
}

// The rounding of the 16-bit type, compounded over a two-layer model's forward and backward.
double tolerance(DType dtype) {
  return dtype == DType::BF16 ? 4e-2 : 8e-3;
}

}  // namespace

void expect_gradients_match_fp32_activations(DType dtype, Device device, const char* attention) {
  GPT2 wide = tiny_model(dtype, DType::F32, device, attention);
  GPT2 narrow = tiny_model(dtype, dtype, device, attention);
  const Batch batch = random_batch(device, 11);
  const Pass want = forward_backward(wide, batch), got = forward_backward(narrow, batch);
  EXPECT_NEAR(got.loss, want.loss, 0.25 * tolerance(dtype) * want.loss) << dtype_name(dtype) << ", " << attention;
  // Each parameter's gradient, against its own scale.
  for (const ParamInfo& p : wide.parameters().infos()) {
    const auto slice = [&](const std::vector<float>& all) {
      return std::vector<float>(all.begin() + p.offset, all.begin() + p.offset + p.numel());
    };
    EXPECT_LT(max_scaled_error(slice(got.grads), slice(want.grads), 1e-4), tolerance(dtype))
        << p.name << ", " << dtype_name(dtype) << ", " << attention;
  }
}

void expect_training_follows_fp32_activations(DType dtype, Device device, int steps) {
  std::vector<double> losses[2];
  for (int narrow = 0; narrow < 2; ++narrow) {
    GPT2 model = tiny_model(dtype, narrow ? dtype : DType::F32, device);
    AdamW optimizer(model.parameters(), AdamWConfig{});
    TrainStep step(model, optimizer, TrainStepConfig{});
    if (dtype == DType::F16) step.set_loss_scaling(LossScalerConfig{});
    const Batch batch = random_batch(device, 12);
    for (int s = 0; s < steps; ++s)
      losses[narrow].push_back(step.run([&] { return MicroBatch{batch.tokens, batch.targets}; }, 3e-3).loss);
  }
  EXPECT_LT(losses[1].back(), (steps > 5 ? 0.9 : 0.99) * losses[1].front()) << "it learns";
  for (size_t s = 0; s < losses[0].size(); ++s)
    EXPECT_NEAR(losses[1][s], losses[0][s], 0.25 * tolerance(dtype) * losses[0][s]) << "step " << s;
}

void expect_activations_take_half_the_bytes(DType dtype, Device device) {
  int64_t peak[2] = {0, 0};
  for (int narrow = 0; narrow < 2; ++narrow) {
    GPT2 model = tiny_model(dtype, narrow ? dtype : DType::F32, device);
    const Batch batch = random_batch(device, 13);
    allocator_for(device).reset_peak();
    const int64_t before = memory_stats(device).live_of(MemCategory::Activations);
    Tape tape;
    model.loss(tape, batch.tokens, batch.targets);
    peak[narrow] = memory_stats(device).peak_of(MemCategory::Activations) - before;
  }
  const double ratio = static_cast<double>(peak[1]) / static_cast<double>(peak[0]);
  std::printf("activation peak of a recorded forward: fp32 %lld bytes, %s %lld bytes (%.3f)\n",
              static_cast<long long>(peak[0]), dtype_name(dtype), static_cast<long long>(peak[1]), ratio);
  // Half, but for what stays f32: the losses, LayerNorm's statistics and flash attention's log-sum-exps.
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.53);
}

void expect_no_conversion_between_ops(DType dtype, Device device) {
  int64_t converts[2] = {0, 0};
  for (int narrow = 0; narrow < 2; ++narrow) {
    GPT2 model = tiny_model(dtype, narrow ? dtype : DType::F32, device);
    AdamW optimizer(model.parameters(), AdamWConfig{});
    TrainStep step(model, optimizer, TrainStepConfig{});
    const Batch batch = random_batch(device, 14);
    StepProfile profile;
    step.run([&] { return MicroBatch{batch.tokens, batch.targets}; }, 1e-3);
    profile.close();
    for (const ProfileRow& row : profile.rows(ProfileKind::Op))
      if (row.name == "convert") converts[narrow] = row.calls;
  }
  EXPECT_EQ(converts[1], 0) << "none: not between ops, nor for the weights' 16-bit copy, which AdamW writes itself";
  EXPECT_GT(converts[0], 10) << "with fp32 activations every linear rounds its input";
}

}  // namespace lab::test
