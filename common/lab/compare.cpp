// Tolerances, element-by-element comparison and the low-precision rule (see compare.h).
#include "common/lab/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/core/error.h"

namespace lab {

namespace {

// The largest |x| of a sample (NaN elements ignored: they fail elsewhere).
double max_abs(const std::vector<float>& values) {
  double scale = 0.0;
  for (const float x : values) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  return scale;
}

// The largest |a - b|; NaN when any difference is NaN.
double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(diff)) return std::numeric_limits<double>::quiet_NaN();
    worst = std::max(worst, diff);
  }
  return worst;
}

std::string count_mismatch(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  if (a.numel() == b.numel()) return "";
  return cat(a_name, " has ", a.numel(), " elements, ", b_name, " ", b.numel());
}

}  // namespace

Tensor poisoned(const Shape& shape, Device device) {
  Tensor t = Tensor::empty(shape, DType::F32, device);
  t.fill_(std::numeric_limits<float>::quiet_NaN());
  return t;
}

double dtype_epsilon(DType dtype) {
  switch (dtype) {
    case DType::F32: return 0x1p-23;
    case DType::BF16: return 0x1p-7;
    case DType::F16: return 0x1p-10;
    default: break;
  }
  fail(ErrorKind::InvalidArgument, "dtype_epsilon: ", dtype_name(dtype), " is not a floating-point type");
}

Tolerance tolerance_for(DType dtype, int64_t reduction_length) {
  const double tol =
      16.0 * dtype_epsilon(dtype) * std::sqrt(static_cast<double>(std::max<int64_t>(1, reduction_length)));
  return {tol, tol};
}

Tolerance tolerance_for_offset(DType dtype, int64_t reduction_length, double offset_over_spread) {
  const Tolerance usual = tolerance_for(dtype, reduction_length);
  const double inherited = 8.0 * dtype_epsilon(dtype) * offset_over_spread;
  return {std::max(usual.rel, inherited), std::max(usual.abs, inherited)};
}

CloseReport compare_close(const Tensor& actual, const Tensor& expected, Tolerance tol, int max_listed) {
  CloseReport report;
  report.tol = tol;
  report.size_mismatch = count_mismatch(actual, "the result", expected, "the reference");
  if (!report.size_mismatch.empty()) return report;
  const std::vector<float> a = actual.to_floats();
  const std::vector<float> e = expected.to_floats();
  report.count = static_cast<int64_t>(e.size());
  report.scale = max_abs(e);
  for (size_t i = 0; i < e.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    const double allowed = tol.rel * std::fabs(static_cast<double>(e[i])) + tol.abs * report.scale;
    if (diff <= allowed) continue;  // false for NaN
    if (++report.bad <= max_listed) report.first_bad.push_back({static_cast<int64_t>(i), a[i], e[i], allowed});
  }
  return report;
}

std::string CloseReport::describe(const std::string& what) const {
  if (!size_mismatch.empty()) return cat(what, ": ", size_mismatch);
  if (bad == 0) return cat(what, ": all ", count, " elements within rel ", tol.rel, ", abs ", tol.abs, " x ", scale);
  std::string text = cat(what, ": ", bad, " of ", count, " elements differ from the reference (rel ", tol.rel, ", abs ",
                         tol.abs, " x ", scale, "); first:");
  for (const BadElement& b : first_bad)
    text += cat("\n  [", b.index, "] ", b.actual, " vs ", b.expected, " (allowed ", b.allowed, ")");
  return text;
}

ErrorRatioReport compare_error_to_baseline(const Tensor& actual, const Tensor& baseline, const Tensor& exact,
                                           DType output_dtype, double factor, double allowance) {
  ErrorRatioReport report;
  report.factor = factor;
  report.allowance = allowance;
  report.size_mismatch = count_mismatch(actual, "the result", exact, "the exact reference");
  if (report.size_mismatch.empty())
    report.size_mismatch = count_mismatch(baseline, "the same-precision baseline", exact, "the exact reference");
  if (!report.size_mismatch.empty()) return report;
  const std::vector<float> e = exact.to_floats();
  // An all-zero reference is judged in absolute terms.
  const double scale = std::max(max_abs(e), std::numeric_limits<double>::min());
  report.actual_error = max_abs_difference(actual.to_floats(), e) / scale;
  report.baseline_error = max_abs_difference(baseline.to_floats(), e) / scale;
  report.allowed_error = factor * std::max(report.baseline_error, dtype_epsilon(output_dtype) / 2) + allowance;
  return report;
}

std::string ErrorRatioReport::describe(const std::string& what) const {
  if (!size_mismatch.empty()) return cat(what, ": ", size_mismatch);
  return cat(what, ": relative max error ", actual_error, " vs ", baseline_error, " of the same-precision baseline (",
             ok() ? "within " : "beyond ", factor, "x", allowance > 0 ? cat(" + ", allowance, " of approximation") : "",
             ": allowed ", allowed_error, ")");
}

}  // namespace lab
