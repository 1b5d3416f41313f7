// The ops and kernel launches of one training step of a tiny GPT-2, counted by the step profile
// (common/core/step_profile.h): what the launch-count tests on the CPU and under CUDA share.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/device.h"
#include "common/core/dtype.h"
#include "common/core/step_profile.h"
#include "common/nn/modules.h"

namespace lab::test {

struct StepCounts {
  int64_t ops = 0, kernels = 0;
  ZeroFills zero_fills;
  std::string op_table, kernel_table;  // to print when a count is not the one expected
};

// One TrainStep (the core's kernels and attention, clipping on) of a GPT-2 with `layers` blocks of width 32,
// 2 heads, batch 2 x 16 tokens, on `device`, after one untimed step (so that nothing is allocated or created for
// the first time inside the profile). `dtype` f32: fp32 throughout; bf16 or f16: matmuls in that type and the
// activations in it end to end (ModelOptions::activations, gpt2_train's --activations 16bit).
// `options`: the model's hooks (the core's by default; chapter 6's fused kernels, say), its activations set here.
// How attention's backward reaches qkv's gradient, which it is the first (and only) contributor to:
//   Adds       adds into it: zero-filled in the activations' dtype (the core attention in fp32)
//   AddsInF32  adds into an f32 gradient, zero-filled, then converted into qkv's own (16-bit activations, the core
//              attention computing in f32); qkv's own is written by the conversion (before, zero-filled as well)
//   Writes     writes it over a new buffer (flash attention in the activations' dtype)
enum class QkvGradient { Adds, AddsInF32, Writes };

// The zero-fills of that step with activations (and so their gradients) of `activation_bytes` an element: the
// parameters' flat gradient at the step's start (f32), the step's three f32 scalars on the device, and each block's
// qkv gradient as `qkv` says (one per block, or none). Every other gradient's first contribution is written over a
// new buffer (ops::GradWrite: the linear layers', GELU's and LayerNorm's) or handed on (the residual adds'). Before
// that, 4 + 6 a block: each linear's input gradient, GELU's and ln_f's were zero-filled as well.
ZeroFills expected_zero_fills(int64_t layers, int64_t activation_bytes, QkvGradient qkv = QkvGradient::Adds);

StepCounts count_one_step(Device device, int64_t layers, DType dtype = DType::F32, ModelOptions options = {});

}  // namespace lab::test
