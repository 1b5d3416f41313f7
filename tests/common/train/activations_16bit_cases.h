// What the tests of 16-bit activations end to end (ModelOptions::activations) share, on the CPU
// (test_activations_16bit.cpp) and on CUDA (test_activations_16bit_cuda.cpp, label cuda): a tiny GPT-2 with 16-bit
// matmuls run with fp32 activations and with 16-bit ones, from the same weights.
#pragma once

#include "common/core/device.h"
#include "common/core/dtype.h"

namespace lab::test {

// The loss and every parameter's gradient of one forward and backward agree with the fp32-activation model's to the
// 16-bit type's rounding (bf16: 8 significant bits, f16: 11), with `attention` "materialized", "batched" or "flash".
void expect_gradients_match_fp32_activations(DType dtype, Device device, const char* attention);
// `steps` AdamW steps on one batch: the losses follow the fp32-activation run's.
void expect_training_follows_fp32_activations(DType dtype, Device device, int steps);
// A recorded forward pass (flash attention, whose log-sum-exps are f32 either way) keeps about half the activation
// bytes of the fp32-activation one.
void expect_activations_take_half_the_bytes(DType dtype, Device device);
// One training step converts nothing but the weights' 16-bit copy after the update: no ops::convert between two ops
// (with fp32 activations every linear rounds its input, so there are dozens).
void expect_no_conversion_between_ops(DType dtype, Device device);

}  // namespace lab::test
