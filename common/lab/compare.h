// Comparing a result with its reference: tolerances derived from the dtype, element-by-element closeness
// with the first bad elements named, poisoned outputs, and the low-precision rule.
//
// Every fast path of the project is judged by these, in the kernel labs (kernel_lab.h) and in the tests
// (tests/support/op_check.h wraps compare_close() for GoogleTest).
//
// Two ways to judge a result:
//   close:          every element within a tolerance of the reference (tolerance_for() derives it from the
//                   dtype and the length of the sums behind an element);
//   low precision:  a bf16/fp16 implementation is not judged against a tolerance made up for it but against
//                   what the precision itself costs: its error against an accurate reference (fp64, or fp32
//                   on inputs that are exact in the low precision) must stay within a small factor of the
//                   error of a straightforward same-precision reference computation (compare_error_to_baseline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/tensor.h"

namespace lab {

// A tensor of NaN (f32) on `device`. An op that leaves any element of its output unwritten then fails the
// comparison, since NaN is never close to anything.
Tensor poisoned(const Shape& shape, Device device);

// How far a result may be from the reference: |actual - expected| <= rel * |expected| + abs * scale, where
// scale is the largest |expected| of the tensor (so near-zero elements are judged against the tensor's
// magnitude, not their own).
struct Tolerance {
  double rel = 0;
  double abs = 0;
};

// The machine epsilon of a floating-point dtype, the gap between 1 and the next value: 2^-23 for f32, 2^-7 for
// bf16, 2^-10 for f16.
// Error(InvalidArgument) for an integer dtype.
double dtype_epsilon(DType dtype);

// From the dtype's machine epsilon and the length of the longest sum behind one output element: rounding
// errors of a sum of K terms grow like sqrt(K) eps, and two implementations that sum in different orders
// (a warp tree here, SIMD lanes there) may each sit that far from the exact value.
Tolerance tolerance_for(DType dtype, int64_t reduction_length);

// For inputs that sit far from zero compared with their spread (logits around 1000, LayerNorm rows with mean
// 1e4 and std 1): each input is only known to about eps * offset, and every result computed from differences
// between inputs inherits that error relative to the spread. The tolerance is the larger of tolerance_for()
// and 8 eps * offset_over_spread.
Tolerance tolerance_for_offset(DType dtype, int64_t reduction_length, double offset_over_spread);

// One element outside the tolerance.
struct BadElement {
  int64_t index = 0;  // flat index
  double actual = 0;
  double expected = 0;
  double allowed = 0;  // the largest difference the tolerance allowed there
};

// The outcome of compare_close().
struct CloseReport {
  int64_t count = 0;  // elements compared
  int64_t bad = 0;    // elements outside the tolerance (NaN counts as outside)
  double scale = 0;   // the largest |expected|
  Tolerance tol;
  std::vector<BadElement> first_bad;  // the first few, in index order
  std::string size_mismatch;          // non-empty when the element counts differ (nothing else compared)

  bool ok() const { return size_mismatch.empty() && bad == 0; }
  // "what: 3 of 4096 elements differ from the reference (rel 1e-05, abs 1e-05 x 2.5); first:\n  [17] ..."
  std::string describe(const std::string& what) const;
};

// Every element of `actual` (any device, any float dtype) within `tol` of `expected` (likewise).
CloseReport compare_close(const Tensor& actual, const Tensor& expected, Tolerance tol, int max_listed = 5);

// The low-precision rule. `actual` is the implementation's output, `baseline` a straightforward computation in
// the same precision (the textbook loop, rounding where the precision rounds), `exact` an accurate reference
// (fp32 from fp64 accumulation, or fp32 of inputs that are exact in the low precision). The error of each is
// the largest |x - exact| over the tensor, relative to the largest |exact|. The implementation passes when its
// error is at most `factor` times the baseline's, where the baseline's error counts as at least the rounding of
// the output itself (eps(output_dtype) / 2, so an exact baseline does not demand an exact implementation).
struct ErrorRatioReport {
  double actual_error = 0;    // relative max error of the implementation (NaN when it has a NaN)
  double baseline_error = 0;  // relative max error of the same-precision baseline
  double allowed_error = 0;   // factor * max(baseline_error, eps / 2) + allowance
  double factor = 0;
  double allowance = 0;  // relative error allowed on top, for an approximate function (e.g. an epilogue's GELU)
  std::string size_mismatch;

  bool ok() const { return size_mismatch.empty() && actual_error <= allowed_error; }  // false for NaN
  std::string describe(const std::string& what) const;
};

ErrorRatioReport compare_error_to_baseline(const Tensor& actual, const Tensor& baseline, const Tensor& exact,
                                           DType output_dtype, double factor = 4.0, double allowance = 0.0);

}  // namespace lab
