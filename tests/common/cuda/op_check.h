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

// For inputs that sit far from zero compared with their spread (logits around 1000, LayerNorm rows with mean
// 1e4 and std 1): each input is only known to about eps * offset, and every result computed from differences
// between inputs inherits that error relative to the spread. The tolerance is the larger of tolerance_for()
// and 8 eps * offset_over_spread.
Tolerance tolerance_for_offset(DType dtype, int64_t reduction_length, double offset_over_spread);

// Every element of `actual` (any device) within `tol` of `expected` (any device); NaN anywhere fails.
// On failure the message names the tensor, counts the bad elements and lists the first few.
::testing::AssertionResult all_close(const char* what, const Tensor& actual, const Tensor& expected, Tolerance tol);

}  // namespace lab::test
