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
// The zero-fills of that step on `device`, none in the blocks. On CUDA one: the step's three f32 scalars, whatever
// the number of blocks. Every parameter's gradient is written over by its first contribution of the step
// (ag::parameter_gradients: the linear layers' weight and bias gradients, the LayerNorms', the LM head's into wte's,
// which the embedding's backward then adds to, and the embedding's into wpe's, whose every row a step of 16 tokens
// reaches); until the embedding wrote wpe's over too, its gradient (f32, 16 x 32) was zero-filled first, 2 fills.
// Before that, and still on the CPU (ParameterStore::start_new_gradients says why), the whole flat gradient buffer
// is zero-filled at the step's start, 4 bytes a parameter, beside the scalars: 2 fills. Every activation's gradient is
// written over a new buffer by its first contribution (ops::GradWrite: the linear layers', GELU's, LayerNorm's and
// attention's into qkv's, every attention, directly or through an f32 workspace it writes whole and that is converted
// into it) or handed on (the residual adds'). Before that, 4 + 6 a block: each linear's input gradient, GELU's, ln_f's
// and qkv's were zero-filled as well (and, under 16-bit activations with the core attention, the f32 qkv gradient it
// added into).
ZeroFills expected_zero_fills(int64_t layers, Device device);

StepCounts count_one_step(Device device, int64_t layers, DType dtype = DType::F32, ModelOptions options = {});

}  // namespace lab::test
