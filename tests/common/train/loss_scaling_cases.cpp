// fp16 loss scaling on the device (see loss_scaling_cases.h).
#include "tests/common/train/loss_scaling_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/core/tensor.h"
#include "common/nn/gpt2.h"
#include "common/ops/adamw.h"
#include "common/ops/classifier.h"
#include "common/ops/grad_scale.h"
#include "common/ops/loss_scale.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor scalar_on(float value, Device device) {
  return Tensor::from_floats(std::vector<float>{value}, {1}).to(device);
}

}  // namespace

void expect_the_device_rule_is_the_hosts(Device device) {
  const LossScalerConfig config{1024.0, 2.0, 0.5, 3};
  DynamicLossScaler host(config);
  const Tensor scaler =
      Tensor::from_floats(std::vector<float>{1024.0f, 0.0f, 0.0f, 0.0f}, {ops::kLossScaleSlots}).to(device);
  // Growth after three clean steps, backoff on inf and on NaN, a clean run interrupted, growth again.
  const std::vector<float> norms{1.0f, 2.0f, 3.0f, kInf, 1.0f, kNaN, 0.5f, 0.5f, 0.5f, 0.5f, kInf, 7.0f};
  for (size_t i = 0; i < norms.size(); ++i) {
    const float grad_scale = 0.25f;
    const Tensor norm_and_scale = Tensor::from_floats(std::vector<float>{norms[i], grad_scale}, {2}).to(device);
    ops::update_loss_scale(norm_and_scale, scaler, config.growth_factor, config.backoff_factor, config.growth_interval);
    const bool finite = std::isfinite(norms[i]);
    host.update(finite);
    const std::vector<float> s = scaler.to_floats(), ns = norm_and_scale.to_floats();
    EXPECT_EQ(s[ops::kLossScale], host.scale()) << "step " << i;
    EXPECT_EQ(s[ops::kCleanSteps], static_cast<float>(host.state().clean_steps)) << "step " << i;
    EXPECT_EQ(s[ops::kSkippedSteps], static_cast<float>(host.state().skipped_steps)) << "step " << i;
    EXPECT_EQ(s[ops::kStepSkipped], finite ? 0.0f : 1.0f) << "step " << i;
    if (finite)
      EXPECT_EQ(ns[1], grad_scale) << "step " << i;
    else
      EXPECT_TRUE(std::isnan(ns[1])) << "step " << i << ": a skipped step's gradient scale is NaN, got " << ns[1];
  }
  EXPECT_EQ(host.state().skipped_steps, 3);
  EXPECT_EQ(host.scale(), 512.0);  // 1024 -> 2048 -> 1024 -> 512 -> 1024 -> 512
}

void expect_adamw_reads_its_scale_and_its_skip_on_the_device(Device device) {
  Rng rng(11);
  const int64_t n = 1000;
  const Tensor params = random_normal({n}, rng), grads = random_normal({n}, rng);
  const Tensor m = random_normal({n}, rng, 0.1f);
  std::vector<float> second_moments = random_normal({n}, rng, 0.1f).to_floats();
  for (float& x : second_moments) x *= x;  // v >= 0
  const Tensor v = Tensor::from_floats(second_moments, {n});
  ops::AdamWHyper hyper;
  hyper.weight_decay = 0.1f;
  hyper.step = 3;
  const std::vector<ElementRange> decay{{100, 600}};
  struct State {
    Tensor p, m, v, copy;
  };
  const auto fresh = [&] {
    return State{params.to(device), m.to(device), v.to(device), Tensor::zeros({n}, DType::F16, device)};
  };
  // value * on_device[0], against the product passed as a number.
  const State host = fresh(), on_device = fresh();
  ops::adamw_update(host.p, grads.to(device), host.m, host.v, hyper, ops::GradScale(0.75f * 0.5f), decay, host.copy);
  ops::adamw_update(on_device.p, grads.to(device), on_device.m, on_device.v, hyper,
                    ops::GradScale(scalar_on(0.5f, device), 0.75f), decay, on_device.copy);
  EXPECT_EQ(on_device.p.to_floats(), host.p.to_floats());
  EXPECT_EQ(on_device.m.to_floats(), host.m.to_floats());
  EXPECT_EQ(on_device.v.to_floats(), host.v.to_floats());
  EXPECT_EQ(on_device.copy.to_floats(), host.copy.to_floats());
  EXPECT_NE(host.p.to_floats(), params.to_floats());
  // A scale that is not finite: nothing moves.
  for (const float mark : {kNaN, kInf}) {
    const State skipped = fresh();
    const Tensor copy_before = skipped.copy.clone();
    ops::adamw_update(skipped.p, grads.to(device), skipped.m, skipped.v, hyper, ops::GradScale(scalar_on(mark, device)),
                      decay, skipped.copy);
    EXPECT_EQ(skipped.p.to_floats(), params.to_floats()) << mark;
    EXPECT_EQ(skipped.m.to_floats(), m.to_floats()) << mark;
    EXPECT_EQ(skipped.v.to_floats(), v.to_floats()) << mark;
    EXPECT_EQ(skipped.copy.to_floats(), copy_before.to_floats()) << mark;
  }
}

void expect_the_classifier_reads_its_scale_on_the_device(Device device) {
  Rng rng(12);
  const int64_t N = 7, Vp = 72, vocab = 65;
  const Tensor logits = random_normal({N, Vp}, rng, 2.0f);
  const Tensor targets = random_ids({N}, rng, vocab);
  const float per_row = 1.0f / static_cast<float>(N), scale = 4096.0f;
  for (const DType dtype : {DType::F32, DType::BF16}) {
    const Tensor host = logits.to_dtype(dtype).to(device), on_device = logits.to_dtype(dtype).to(device);
    const Tensor host_losses = Tensor::zeros({N}, DType::F32, device);
    const Tensor device_losses = Tensor::zeros({N}, DType::F32, device);
    ops::fused_classifier(host, host_losses, targets.to(device), vocab, ops::GradScale(per_row * scale));
    ops::fused_classifier(on_device, device_losses, targets.to(device), vocab,
                          ops::GradScale(scalar_on(scale, device), per_row));
    EXPECT_EQ(on_device.to_floats(), host.to_floats()) << dtype_name(dtype);
    EXPECT_EQ(device_losses.to_floats(), host_losses.to_floats()) << dtype_name(dtype);
    EXPECT_NE(host.to_floats(), logits.to_dtype(dtype).to_floats()) << "no gradient was written";
  }
}

void expect_an_overflow_skips_the_step_on_the_device(Device device) {
  GPT2 model(tiny_gpt2_config(64), device);
  model.init_weights(3);
  model.set_matmul_dtype(DType::F16);
  AdamW optimizer(model.parameters(), AdamWConfig{});
  OverflowAt step(model, optimizer, TrainStepConfig{}, 1);
  step.set_loss_scaling(LossScalerConfig{1024.0, 2.0, 0.5, 1000});
  Rng rng(13);
  const BatchSource batches = [&] {
    return MicroBatch{random_ids({2, 16}, rng, 64).to(device), random_ids({2, 16}, rng, 64).to(device)};
  };
  EXPECT_FALSE(step.run(batches, 1e-3).skipped);
  const std::vector<float> weights = model.parameters().params().to_floats();
  const std::vector<float> copy = model.params_16bit().to_floats();
  const std::vector<float> m = optimizer.m().to_floats(), v = optimizer.v().to_floats();
  const TrainStepResult overflow = step.run(batches, 1e-3);
  EXPECT_TRUE(overflow.skipped);
  EXPECT_FALSE(std::isfinite(overflow.grad_norm));
  EXPECT_EQ(overflow.loss_scale, 1024.0);
  EXPECT_EQ(model.parameters().params().to_floats(), weights);
  EXPECT_EQ(model.params_16bit().to_floats(), copy);
  EXPECT_EQ(optimizer.m().to_floats(), m);
  EXPECT_EQ(optimizer.v().to_floats(), v);
  EXPECT_EQ(optimizer.steps_taken(), 1);
  EXPECT_EQ(step.loss_scaler()->scale(), 512.0);
  EXPECT_EQ(step.loss_scaler()->state().skipped_steps, 1);
  EXPECT_EQ(step.loss_scaler()->state().clean_steps, 0);

  const TrainStepResult after = step.run(batches, 1e-3);
  EXPECT_FALSE(after.skipped);
  EXPECT_EQ(after.loss_scale, 512.0);
  EXPECT_EQ(optimizer.steps_taken(), 2);
  EXPECT_EQ(step.loss_scaler()->state().clean_steps, 1);
  EXPECT_NE(model.parameters().params().to_floats(), weights);
}

}  // namespace lab::test
