// What every CUDA test shares: the GPU it runs on, and the skip when there is none. A test that needs a
// GPU calls LAB_REQUIRE_GPU() first (or its fixture does in SetUp), so a machine without one reports it
// as skipped, never as passed.
#pragma once

#include <gtest/gtest.h>

#include "common/core/device.h"

#define LAB_REQUIRE_GPU()                                                         \
  do {                                                                            \
    if (!::lab::cuda_available()) GTEST_SKIP() << "no CUDA GPU visible: skipped"; \
  } while (0)

namespace lab::test {

inline const Device kGpu = Device::cuda(0);

}  // namespace lab::test
