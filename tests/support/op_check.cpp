#include "tests/support/op_check.h"

namespace lab::test {

::testing::AssertionResult all_close(const char* what, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  const CloseReport report = compare_close(actual, expected, tol);
  if (report.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << report.describe(what);
}

}  // namespace lab::test
