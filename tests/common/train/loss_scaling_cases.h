// What the tests of fp16 loss scaling on the device share, on the CPU (test_loss_scaling.cpp) and on CUDA
// (test_loss_scaling_cuda.cpp, label cuda): the scale, its counts and the skip decision live in device memory, and
// the ops that read them there (the classifier, the norm, AdamW) give what the same numbers passed from the host give.
#pragma once

#include <limits>
#include <vector>

#include "common/core/device.h"
#include "common/core/tensor.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"

namespace lab::test {

// A step that puts +inf into one gradient element after the backward of one chosen step (reduce_gradients runs
// after the last backward and before the norm): the test hook for an overflow, on any device.
class OverflowAt : public TrainStep {
 public:
  OverflowAt(GPT2& model, AdamW& optimizer, TrainStepConfig config, int64_t step)
      : TrainStep(model, optimizer, config), overflow_step_(step) {}

 protected:
  void reduce_gradients() override {
    if (steps_++ != overflow_step_) return;
    const Tensor grads = model().parameters().grad("h.0.mlp.c_fc.weight");
    std::vector<float> values = grads.to_floats();
    values[7] = std::numeric_limits<float>::infinity();
    grads.copy_from(Tensor::from_floats(values, grads.shape()));
  }

 private:
  int64_t overflow_step_, steps_ = 0;
};

// ops::update_loss_scale over a run of finite and inf/NaN norms moves the scale and the counts as
// DynamicLossScaler::update does, says which steps were skipped, and marks a skipped step's gradient scale NaN
// (leaving a taken step's as it was).
void expect_the_device_rule_is_the_hosts(Device device);
// AdamW with a gradient scale read on the device: value * on_device[0], bit for bit the host number's update; and a
// scale that is not finite updates nothing (params, moments, the 16-bit copy).
void expect_adamw_reads_its_scale_and_its_skip_on_the_device(Device device);
// The classifier's backward with dloss = value * a scale on the device: bit for bit the host number's gradient
// (f32 and bf16 logits), and the same losses.
void expect_the_classifier_reads_its_scale_on_the_device(Device device);
// An fp16 step whose gradients overflow: skipped on the device (weights, moments and AdamW's step count as they
// were), the scale halved and the skip counted in the report; the next step is taken at the halved scale.
void expect_an_overflow_skips_the_step_on_the_device(Device device);

}  // namespace lab::test
