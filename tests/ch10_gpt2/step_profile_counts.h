// The ops and kernel launches of one training step of a tiny GPT-2, counted by the step profile
// (common/core/step_profile.h): what the launch-count tests on the CPU and under CUDA share.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/device.h"

namespace lab::test {

struct StepCounts {
  int64_t ops = 0, kernels = 0;
  std::string op_table, kernel_table;  // to print when a count is not the one expected
};

// One TrainStep (fp32, the core's kernels and attention, clipping on) of a GPT-2 with `layers` blocks of width 32,
// 2 heads, batch 2 x 16 tokens, on `device`, after one untimed step (so that nothing is allocated or created for
// the first time inside the profile).
StepCounts count_one_step(Device device, int64_t layers);

}  // namespace lab::test
