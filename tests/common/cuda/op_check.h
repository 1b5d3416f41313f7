// Comparing a CUDA op with the CPU reference: poisoned outputs and tolerances derived from the dtype.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::test {

// A tensor of NaN on `device`. An op that leaves any element of its output unwritten then fails the
// comparison, since NaN is never close to anything.
Tensor poisoned(const Shape& shape, Device device);

// How far a result may be from the reference: |actual - expected| <= rel * |expected| + abs * scale, where
// scale is the largest |expected| of the tensor (so near-zero elements are judged against the tensor's
// magnitude, not their own).
struct Tolerance {
  double rel;
  double abs;
};

// From the dtype's machine epsilon and the length of the longest sum behind one output element: rounding
// errors of a sum of K terms grow like sqrt(K) eps, and two implementations that sum in different orders
// (a warp tree here, SIMD lanes there) may each sit that far from the exact value.
Tolerance tolerance_for(DType dtype, int64_t reduction_length);

// Every element of `actual` (any device) within `tol` of `expected` (any device); NaN anywhere fails.
// On failure the message names the tensor, counts the bad elements and lists the first few.
::testing::AssertionResult all_close(const char* what, const Tensor& actual, const Tensor& expected, Tolerance tol);

}  // namespace lab::test
