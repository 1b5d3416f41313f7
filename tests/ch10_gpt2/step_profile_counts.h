// The ops and kernel launches of one training step of a tiny GPT-2, counted by the step profile
// (common/core/step_profile.h): what the launch-count tests on the CPU and under CUDA share.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/device.h"
#include "common/core/dtype.h"
#include "common/nn/modules.h"

namespace lab::test {

struct StepCounts {
  int64_t ops = 0, kernels = 0;
  std::string op_table, kernel_table;  // to print when a count is not the one expected
};

// One TrainStep (the core's kernels and attention, clipping on) of a GPT-2 with `layers` blocks of width 32,
// 2 heads, batch 2 x 16 tokens, on `device`, after one untimed step (so that nothing is allocated or created for
// the first time inside the profile). `dtype` f32: fp32 throughout; bf16 or f16: matmuls in that type and the
// activations in it end to end (ModelOptions::activations, gpt2_train's --activations 16bit).
// `options`: the model's hooks (the core's by default; chapter 6's fused kernels, say), its activations set here.
StepCounts count_one_step(Device device, int64_t layers, DType dtype = DType::F32, ModelOptions options = {});

}  // namespace lab::test
