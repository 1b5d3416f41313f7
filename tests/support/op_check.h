// Comparing a CUDA op with the CPU reference in GoogleTest: all_close() turns common/lab/compare.h's verdict
// into an assertion; the tolerances and poisoned outputs are compare.h's, named here for the tests.
#pragma once

#include <gtest/gtest.h>

#include "common/lab/compare.h"

namespace lab::test {

using lab::poisoned;
using lab::Tolerance;
using lab::tolerance_for;
using lab::tolerance_for_offset;

// Every element of `actual` (any device) within `tol` of `expected` (any device); NaN anywhere fails.
// On failure the message names the tensor, counts the bad elements and lists the first few.
::testing::AssertionResult all_close(const char* what, const Tensor& actual, const Tensor& expected, Tolerance tol);

}  // namespace lab::test
