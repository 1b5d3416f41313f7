#include "tests/common/cuda/op_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace lab::test {

Tensor poisoned(const Shape& shape, Device device) {
  Tensor t = Tensor::empty(shape, DType::F32, device);
  t.fill_(std::numeric_limits<float>::quiet_NaN());
  return t;
}

Tolerance tolerance_for(DType dtype, int64_t reduction_length) {
  double eps = 0.0;
  switch (dtype) {
    case DType::F32: eps = 0x1p-23; break;
    case DType::BF16: eps = 0x1p-7; break;
    case DType::F16: eps = 0x1p-10; break;
    default: ADD_FAILURE() << "tolerance_for: " << dtype_name(dtype) << " is not a floating-point type"; break;
  }
  const double tol = 16.0 * eps * std::sqrt(static_cast<double>(std::max<int64_t>(1, reduction_length)));
  return {tol, tol};
}

Tolerance tolerance_for_offset(DType dtype, int64_t reduction_length, double offset_over_spread) {
  const Tolerance usual = tolerance_for(dtype, reduction_length);
  const double eps = usual.rel / (16.0 * std::sqrt(static_cast<double>(std::max<int64_t>(1, reduction_length))));
  const double inherited = 8.0 * eps * offset_over_spread;
  return {std::max(usual.rel, inherited), std::max(usual.abs, inherited)};
}

::testing::AssertionResult all_close(const char* what, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  if (actual.numel() != expected.numel())
    return ::testing::AssertionFailure() << what << ": " << actual.numel() << " elements, expected "
                                         << expected.numel();
  const std::vector<float> a = actual.to_floats();
  const std::vector<float> e = expected.to_floats();
  double scale = 0.0;
  for (const float x : e) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  int64_t bad = 0;
  ::testing::Message first;
  for (size_t i = 0; i < e.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    const double allowed = tol.rel * std::fabs(static_cast<double>(e[i])) + tol.abs * scale;
    if (diff <= allowed) continue;  // false for NaN
    if (++bad <= 5) first << "\n  [" << i << "] " << a[i] << " vs " << e[i] << " (allowed " << allowed << ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << e.size()
                                       << " elements differ from the reference (rel " << tol.rel << ", abs " << tol.abs
                                       << " x " << scale << "); first:" << first;
}

}  // namespace lab::test
