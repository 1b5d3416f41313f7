// A multiplier of gradients that the host may not know when it queues the op: ops::GradScale.
//
// Two ops of a training step multiply gradients by a number that a training step computes on the device: AdamW's
// update (gradient clipping, and the removal of the loss scale) and the classifier's backward (fp16's loss scale).
// A step that reads nothing back to the host (common/train/train_step.h), and so can be captured in a CUDA graph,
// passes them that number as device memory, which the kernels read themselves.
//
// The scale is `value`, times the first f32 of `on_device` when that is defined (a tensor on the op's device).
// A scale that is not finite has a meaning for AdamW: the update is skipped (ops::adamw_update), which is how a
// step that found inf/NaN gradients under loss scaling tells the update without the host knowing.
#pragma once

#include <utility>

#include "common/core/tensor.h"

namespace lab::ops {

struct GradScale {
  GradScale(float scale = 1.0f) : value(scale) {}  // implicit: a plain number is the common case
  explicit GradScale(Tensor scale, float factor = 1.0f) : value(factor), on_device(std::move(scale)) {}
  float value = 1.0f;
  Tensor on_device;  // when defined, its element 0 multiplies `value`

  // The scale as a number on the host: value * on_device[0] in f32, as the kernels compute it. Reads on_device
  // back when it lives on a GPU (a synchronisation); the CPU ops read it in place this way.
  float read() const;
  // InvalidArgument unless on_device is undefined or an f32 tensor of at least one element; `what` names the op.
  void check(const char* what) const;
  // The device scalar's address for a kernel to read, or null when the scale is `value` alone.
  const float* device_pointer() const { return on_device.defined() ? on_device.data<float>() : nullptr; }
  // The same scale divided by `divisor` (its value divided, the device scalar kept): 1/N of it, for a mean.
  GradScale divided_by(float divisor) const { return GradScale(on_device, value / divisor); }
};

}  // namespace lab::ops
