// Helpers for the tests of chapter 6's kernel labs: select a lab's versions by the device they run on (the GPU
// versions are validated in tests labelled cuda, the CPU versions in CPU tests), and validate them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/lab/kernel_lab.h"

namespace lab::test {

// The numbers (1-based) of the lab's versions that run on devices of `type`.
inline std::vector<int> versions_on(const kernel_lab::KernelLab& lab, DeviceType type) {
  std::vector<int> numbers;
  for (size_t i = 0; i < lab.versions().size(); ++i)
    if (lab.versions()[i].device.type == type) numbers.push_back(static_cast<int>(i) + 1);
  return numbers;
}

// Validates version `number` of `lab`; the assertion names the lab, the version and what failed.
inline ::testing::AssertionResult version_passes(const kernel_lab::KernelLab& lab, int number) {
  const kernel_lab::Validation v = lab.validate_all({number}).front();
  const std::string name =
      lab.name() + " v" + std::to_string(number) + " (" + lab.versions()[static_cast<size_t>(number - 1)].name + ")";
  if (v.passed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ", " << lab.problem() << ": " << v.describe();
}

}  // namespace lab::test
