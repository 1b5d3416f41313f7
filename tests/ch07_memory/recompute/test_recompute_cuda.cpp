// Activation recompute on CUDA: every policy against no recompute on the same device (losses and gradients
// within float rounding: the kernels may sum in another order from run to run), and less activation memory.
#include <gtest/gtest.h>

#include "tests/ch07_memory/recompute/recompute_run.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

using ch07::RecomputePolicy;

TEST(RecomputeCuda, EveryPolicyMatchesNone) {
  LAB_REQUIRE_GPU();
  const GPT2Config config = GPT2Config::from_name("tiny");
  const test::RecomputeRun none = test::run_with_recompute(config, test::kGpu, RecomputePolicy::None, 2, 16);
  for (const RecomputePolicy policy :
       {RecomputePolicy::Selective, RecomputePolicy::SelectiveLayerNorm, RecomputePolicy::Block}) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    const test::RecomputeRun run = test::run_with_recompute(config, test::kGpu, policy, 2, 16);
    EXPECT_LT(test::max_scaled_error(run.losses, none.losses), 1e-5);
    EXPECT_LT(test::max_scaled_error(run.grads, none.grads, 1e-4), 1e-4);
    EXPECT_EQ(run.hooks_run, none.hooks_run);
    EXPECT_LT(run.activation_peak, none.activation_peak);
  }
}

}  // namespace
}  // namespace lab
