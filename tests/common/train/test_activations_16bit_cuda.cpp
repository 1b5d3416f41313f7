// 16-bit activations end to end (ModelOptions::activations) on CUDA (label cuda: runs in the emulation build, skips
// without a GPU): against the same model with fp32 activations, in bf16 and f16 (activations_16bit_cases.h).
#include <gtest/gtest.h>

#include "common/core/device.h"
#include "tests/common/train/activations_16bit_cases.h"

namespace lab {
namespace {

class Activations16BitCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  }
};

TEST_P(Activations16BitCuda, GradientsMatchFp32ActivationsWithEachAttention) {
  for (const char* attention : {"materialized", "batched", "flash"})
    test::expect_gradients_match_fp32_activations(GetParam(), Device::cuda(), attention);
}

TEST_P(Activations16BitCuda, TrainingFollowsFp32Activations) {
  // Three steps: the emulator runs each CUDA kernel on the CPU, a thousand times slower than the CPU's own ops.
  test::expect_training_follows_fp32_activations(GetParam(), Device::cuda(), 3);
}

TEST_P(Activations16BitCuda, ActivationsTakeHalfTheBytes) {
  test::expect_activations_take_half_the_bytes(GetParam(), Device::cuda());
}

TEST_P(Activations16BitCuda, NothingIsConvertedBetweenOps) {
  test::expect_no_conversion_between_ops(GetParam(), Device::cuda());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Activations16BitCuda, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lab
