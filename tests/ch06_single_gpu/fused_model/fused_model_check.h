// What the fused model's tests check on either backend: a GPT-2 running --kernels fused on `device` against the
// reference GPT-2 on the CPU, both initialised from the same seed.
#pragma once

#include <gtest/gtest.h>

#include "common/core/device.h"
#include "common/core/dtype.h"

namespace lab::test {

// Logits (forward only), per-position losses, and the gradient of every parameter after one backward. With
// `matmul_dtype` bf16 or f16 both models run mixed precision (GPT2::set_matmul_dtype).
void expect_fused_matches_reference(Device device, DType matmul_dtype = DType::F32);

// The same with `dtype` (bf16 or f16) matmuls and activations in it end to end (ModelOptions::activations), where
// the fused MLP runs its GELU and GELU's backward in GEMM epilogues: per-position losses and every gradient,
// within the 16-bit type's rounding.
void expect_fused_matches_reference_in_16bit(Device device, DType dtype);

// A few AdamW steps on the same batches: each step's loss and gradient norm, and the final weights.
void expect_fused_training_tracks_reference(Device device);

}  // namespace lab::test
