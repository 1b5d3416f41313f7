// fp16 loss scaling on the device, the CUDA backend (loss_scaling_cases.h; label cuda: runs in the emulation build,
// skips without a GPU).
#include <gtest/gtest.h>

#include "common/core/device.h"
#include "tests/common/train/loss_scaling_cases.h"

namespace lab {
namespace {

TEST(LossScalingOnTheDeviceCuda, TheRuleIsTheHostsRule) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  test::expect_the_device_rule_is_the_hosts(Device::cuda());
}

TEST(LossScalingOnTheDeviceCuda, AdamWReadsItsScaleAndItsSkip) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  test::expect_adamw_reads_its_scale_and_its_skip_on_the_device(Device::cuda());
}

TEST(LossScalingOnTheDeviceCuda, TheClassifierReadsItsScale) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  test::expect_the_classifier_reads_its_scale_on_the_device(Device::cuda());
}

TEST(LossScalingOnTheDeviceCuda, AnOverflowSkipsTheStep) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA GPU";
  test::expect_an_overflow_skips_the_step_on_the_device(Device::cuda());
}

}  // namespace
}  // namespace lab
