// The kernel launches (and cuBLAS calls) of one GPT-2 training step on CUDA (label cuda: runs in the emulation
// build, skips without a GPU), counted by the step profile: exact without a GPU, so an accidental extra kernel
// shows up here. The op count is the CPU's (test_step_profile_counts.cpp).
#include <gtest/gtest.h>

#include "common/core/device.h"
#include "tests/ch10_gpt2/step_profile_counts.h"

namespace lab {
namespace {

// Launches per block and outside the blocks at B = 2 (attention loops over the batch rows), fp32, the core's
// kernels and attention. Per block, 53: 12 cublasSgemm (4 linears forward, and the input's and the weight's
// gradient of each backward), 12 cublasSgemmStridedBatched (attention: 2 products x 2 rows forward, 4 x 2
// backward), 6 column_partial_sums_kernel + 6 column_totals_kernel (the 4 bias gradients, the 2 LayerNorms'
// weight and bias gradients), 4 broadcast_bias_kernel, 2 + 2 LayerNorm, 1 + 2 causal softmax, 2 GELU, 4 residual.
// Outside, 15: 2 embedding, 2 LayerNorm and 2 of its column sums (ln_f), 3 cublasSgemm (the LM head), the fused
// classifier, the losses' sum and the gradient norm each as partial_sums_kernel and one thread adding the partial
// sums on the device (accumulate_sum_kernel, norm_and_scale_kernel: the step reads nothing back), AdamW.
constexpr int64_t kLaunchesPerBlock = 53;
constexpr int64_t kLaunchesOutside = 15;

TEST(StepProfileCountsCuda, LaunchesPerStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  for (const int64_t layers : {1, 2}) {
    const test::StepCounts counts = test::count_one_step(Device::cuda(), layers);
    EXPECT_EQ(counts.ops, 10 + 20 * layers) << layers << " blocks:\n" << counts.op_table;
    EXPECT_EQ(counts.kernels, kLaunchesOutside + kLaunchesPerBlock * layers) << layers << " blocks:\n"
                                                                             << counts.kernel_table;
  }
}

}  // namespace
}  // namespace lab
