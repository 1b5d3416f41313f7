// The model's rungs composed (ch10_gpt2/model_rungs.h) on CUDA (label cuda: runs in the emulation build, skips
// without a GPU), in bf16 mixed precision so that flash attention runs its tensor-core kernels: every compatible
// combination of --kernels, --attention and --recompute gives the plain model's losses and gradients on the same
// device, and the incompatible ones refuse.
#include <gtest/gtest.h>

#include "common/core/device.h"
#include "tests/ch10_gpt2/model_rungs_check.h"

namespace lab {
namespace {

TEST(ModelRungsCuda, EveryCompatibleCombinationInBf16) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  test::expect_every_compatible_combination_matches_the_plain_model(Device::cuda(), DType::BF16, 3e-2);
}

}  // namespace
}  // namespace lab
