// fp16 loss scaling on the device, the CPU backend (loss_scaling_cases.h).
#include <gtest/gtest.h>

#include "common/core/device.h"
#include "tests/common/train/loss_scaling_cases.h"

namespace lab {
namespace {

TEST(LossScalingOnTheDevice, TheRuleIsTheHostsRule) {
  test::expect_the_device_rule_is_the_hosts(Device::cpu());
}

TEST(LossScalingOnTheDevice, AdamWReadsItsScaleAndItsSkip) {
  test::expect_adamw_reads_its_scale_and_its_skip_on_the_device(Device::cpu());
}

TEST(LossScalingOnTheDevice, TheClassifierReadsItsScale) {
  test::expect_the_classifier_reads_its_scale_on_the_device(Device::cpu());
}

TEST(LossScalingOnTheDevice, AnOverflowSkipsTheStep) {
  test::expect_an_overflow_skips_the_step_on_the_device(Device::cpu());
}

}  // namespace
}  // namespace lab
