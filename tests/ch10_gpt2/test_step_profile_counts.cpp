// The ops of one GPT-2 training step on the CPU, counted by the step profile: 18 per block (10 forward: two
// LayerNorms, four linears, attention, GELU, two residual adds; 8 backwards: the residual adds' run none, their
// inputs take the output's gradient as it is, ag::residual_into_stream) and 10 outside them (the
// embedding and the final LayerNorm forward and backward, the LM head's linear forward and backward, the fused
// classifier, the losses' sum added into the step's scalars, the gradient norm and scale, AdamW). An op added to or
// dropped from the step changes these numbers: that is the point of pinning them. So do the step's zero-fills
// (step_profile_counts.h).
#include <gtest/gtest.h>

#include "tests/ch10_gpt2/step_profile_counts.h"

namespace lab {
namespace {

TEST(StepProfileCounts, OpsPerStepOnTheCpu) {
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts = test::count_one_step(Device::cpu(), layers);
    EXPECT_EQ(counts.ops, 10 + 18 * layers) << layers << " blocks:\n" << counts.op_table;
    EXPECT_EQ(counts.kernels, 0);
    EXPECT_EQ(counts.zero_fills.count, test::expected_zero_fills(layers, Device::cpu()).count) << layers << " blocks";
    EXPECT_EQ(counts.zero_fills.bytes, test::expected_zero_fills(layers, Device::cpu()).bytes) << layers << " blocks";
  }
}

}  // namespace
}  // namespace lab
