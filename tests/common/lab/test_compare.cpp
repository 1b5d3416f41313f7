// The comparison helpers every lab and CUDA test judges results with: tolerances from the dtype, closeness
// that names the first bad elements (NaN always fails), and the low-precision rule (a bf16 result is judged
// by the error a straightforward bf16 computation makes, not by a tolerance made up for it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/lab/compare.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

float round_bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits(x));
}

TEST(Tolerance, GrowsWithTheSquareRootOfTheReductionAndTheDtypesEpsilon) {
  EXPECT_DOUBLE_EQ(tolerance_for(DType::F32, 1).rel, 16.0 * 0x1p-23);
  EXPECT_DOUBLE_EQ(tolerance_for(DType::F32, 1024).abs, 16.0 * 0x1p-23 * 32.0);
  EXPECT_DOUBLE_EQ(tolerance_for(DType::BF16, 4).rel, 16.0 * 0x1p-7 * 2.0);
  EXPECT_DOUBLE_EQ(tolerance_for(DType::F16, 0).rel, 16.0 * 0x1p-10);  // an empty sum counts as one term
  // Far-off inputs: the inherited error 8 eps * offset / spread wins once it is the larger.
  EXPECT_DOUBLE_EQ(tolerance_for_offset(DType::F32, 1, 1e4).rel, 8.0 * 0x1p-23 * 1e4);
  EXPECT_DOUBLE_EQ(tolerance_for_offset(DType::F32, 1, 1.0).rel, tolerance_for(DType::F32, 1).rel);
  testing::expect_error([] { tolerance_for(DType::I32, 8); }, ErrorKind::InvalidArgument, {"i32"});
}

TEST(CompareClose, NamesTheFirstBadElementsAndCountsThemAll) {
  const std::vector<float> expected = {1.0f, -2.0f, 3.0f, 4.0f, 0.0f, 8.0f};
  std::vector<float> actual = expected;
  const Tolerance tol{1e-6, 1e-6};
  EXPECT_TRUE(compare_close(Tensor::from_floats(actual, {6}), Tensor::from_floats(expected, {6}), tol).ok());

  actual[2] = 3.1f;
  actual[5] = std::numeric_limits<float>::quiet_NaN();
  const CloseReport r = compare_close(Tensor::from_floats(actual, {6}), Tensor::from_floats(expected, {6}), tol, 1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.count, 6);
  EXPECT_EQ(r.bad, 2);  // the NaN counts
  EXPECT_DOUBLE_EQ(r.scale, 8.0);
  ASSERT_EQ(r.first_bad.size(), 1u);  // only as many listed as asked
  EXPECT_EQ(r.first_bad[0].index, 2);
  EXPECT_FLOAT_EQ(static_cast<float>(r.first_bad[0].actual), 3.1f);
  EXPECT_DOUBLE_EQ(r.first_bad[0].allowed, 1e-6 * 3.0 + 1e-6 * 8.0);
  const std::string text = r.describe("out");
  EXPECT_NE(text.find("out: 2 of 6 elements"), std::string::npos) << text;
  EXPECT_NE(text.find("[2] 3.1 vs 3"), std::string::npos) << text;
}

TEST(CompareClose, NearZeroElementsAreJudgedAgainstTheTensorsScale) {
  // 1e-3 away from an expected 0 is fine when the tensor's largest element is 1e4 and abs = 1e-6.
  const CloseReport r = compare_close(Tensor::from_floats(std::vector<float>{1e-3f, 1e4f}, {2}),
                                      Tensor::from_floats(std::vector<float>{0.0f, 1e4f}, {2}), {1e-6, 1e-6});
  EXPECT_TRUE(r.ok()) << r.describe("t");
}

TEST(CompareClose, PoisonedOutputsFailWhereverTheyWereNotWritten) {
  const Tensor out = poisoned({2, 3}, Device::cpu());
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  out.data<float>()[0] = 1.0f;
  const CloseReport r = compare_close(out, Tensor::from_floats(std::vector<float>(6, 1.0f), {2, 3}), {0.5, 0.5});
  EXPECT_EQ(r.bad, 5);
}

TEST(CompareClose, ADifferentElementCountIsReportedNotCompared) {
  const CloseReport r =
      compare_close(Tensor::zeros({3}, DType::F32), Tensor::zeros({4}, DType::F32), tolerance_for(DType::F32, 1));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.describe("x").find("3 elements, the reference 4"), std::string::npos) << r.describe("x");
}

// Dot products of bf16 inputs, with bf16 outputs: exact (double accumulation), the straightforward baseline
// (float products summed in order, the result stored as bf16), an implementation that sums the same float
// products as a tree (another order, as a GPU reduction would), and one with a bound bug that sums only the
// first half of the terms.
struct Dots {
  std::vector<float> exact, baseline, tree, first_half;
};

float tree_sum(std::vector<float> v) {
  while (v.size() > 1) {
    std::vector<float> next;
    for (size_t i = 0; i < v.size(); i += 2) next.push_back(i + 1 < v.size() ? v[i] + v[i + 1] : v[i]);
    v = std::move(next);
  }
  return v[0];
}

Dots bf16_dots(int rows, int k, uint64_t seed) {
  Rng rng(seed);
  Dots d;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> products;
    double exact = 0;
    for (int i = 0; i < k; ++i) {
      const float x = round_bf16(rng.normal()), y = round_bf16(rng.normal());
      exact += static_cast<double>(x) * y;
      products.push_back(x * y);
    }
    float in_order = 0, half = 0;
    for (int i = 0; i < k; ++i) {
      in_order += products[static_cast<size_t>(i)];
      if (i < k / 2) half += products[static_cast<size_t>(i)];
    }
    d.exact.push_back(static_cast<float>(exact));
    d.baseline.push_back(round_bf16(in_order));
    d.tree.push_back(round_bf16(tree_sum(products)));
    d.first_half.push_back(round_bf16(half));
  }
  return d;
}

Tensor tensor_of(const std::vector<float>& v) {
  return Tensor::from_floats(v, {static_cast<int64_t>(v.size())});
}

TEST(LowPrecisionRule, AnotherSummationOrderPasses) {
  const Dots d = bf16_dots(64, 256, 1);
  const ErrorRatioReport r =
      compare_error_to_baseline(tensor_of(d.tree), tensor_of(d.baseline), tensor_of(d.exact), DType::BF16);
  EXPECT_TRUE(r.ok()) << r.describe("dot");
  EXPECT_GT(r.actual_error, 0.0);
  EXPECT_GT(r.baseline_error, 0.0);
  EXPECT_DOUBLE_EQ(r.allowed_error, 4.0 * std::max(r.baseline_error, 0x1p-8));
}

TEST(LowPrecisionRule, ABrokenImplementationFailsIt) {
  const Dots d = bf16_dots(64, 256, 2);
  const ErrorRatioReport bad =
      compare_error_to_baseline(tensor_of(d.first_half), tensor_of(d.baseline), tensor_of(d.exact), DType::BF16);
  EXPECT_FALSE(bad.ok()) << bad.describe("dot");
  EXPECT_NE(bad.describe("dot").find("beyond"), std::string::npos) << bad.describe("dot");

  std::vector<float> with_nan = d.tree;
  with_nan[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(
      compare_error_to_baseline(tensor_of(with_nan), tensor_of(d.baseline), tensor_of(d.exact), DType::BF16).ok());
}

TEST(LowPrecisionRule, AnExactBaselineStillAllowsTheOutputsOwnRounding) {
  const std::vector<float> exact = {1.0f, 1.0f + 0x1p-20f};  // not representable in bf16
  const std::vector<float> rounded = {1.0f, round_bf16(exact[1])};
  const ErrorRatioReport r =
      compare_error_to_baseline(Tensor::from_floats(rounded, {2}), Tensor::from_floats(exact, {2}),
                                Tensor::from_floats(exact, {2}), DType::BF16, 2.0);
  EXPECT_EQ(r.baseline_error, 0.0);
  EXPECT_DOUBLE_EQ(r.allowed_error, 2.0 * 0x1p-8);
  EXPECT_TRUE(r.ok()) << r.describe("x");
}

}  // namespace
}  // namespace lab
