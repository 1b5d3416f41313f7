// The CPU batched attention (common/ops/batched_attention.h) in bf16 and f16 against the f32 attention
// (common/ops/attention.h) run on the same inputs, rounded to the 16-bit type: at T = 1, 37, 130, 1 to 4 heads,
// head sizes 8 to 64. The tolerances are first-order bounds of what the op's roundings cost (below); also the
// causal structure of the stored probabilities, that the backward adds into dqkv, f32 as the f32 op itself, and
// the dtype mixes the op refuses.
//
// Tolerances. u is the 16-bit unit roundoff (2^-8 bf16, 2^-11 f16); ue = u + 2^-16 also covers the f32 rounding of
// sums of at most a few hundred terms (T 2^-24 < 2^-17) and the terms of second order (u^2 <= 2^-16). A rounded value
// x' = x (1 + e), |e| <= u. To first order in u, element by element (P the reference's probabilities, sums over the
// causal range, per head):
//   probs  P' = round(P):                      |P' - P|    <= ue |P|
//   out    round(sum_s P'_ts v_s):             |d out_t|   <= ue |out_t| + ue sum_s P_ts |v_s|
//   dv     round(dv0 + sum_t P'_ts dO_t):      |d dv_s|    <= ue |dv_s|  + ue sum_t P_ts |dO_t|
//   dS     round(scale P' (dP - D')), D' = sum_s P'_ts dP_ts (the P' moves D by at most u A_t, A_t = sum_s P |dP|):
//                                              |d dS_ts|   <= E_ts = ue scale P_ts (2 |dP_ts - D_t| + A_t)
//          (P's rounding u P |dP - D|, D's u P A_t, the rounding of dS itself u P |dP - D|)
//   dq     round(dq0 + sum_s dS_ts k_s):       |d dq_t|    <= ue |dq_t| + sum_s E_ts |k_s|
//   dk     round(dk0 + sum_t dS_ts q_t):       |d dk_s|    <= ue |dk_s| + sum_t E_ts |q_t|
// Each element is checked against its own bound. They hold whatever the signs of the terms, yet are not loose: at
// T > 1 some element's error reaches 60-95% of its bound (the final rounding's share is exact). A wrong scale,
// mask or transpose, or an overwrite of dqkv, exceeds them by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/core/error.h"
#include "common/ops/batched_attention.h"
#include "tests/common/expect_error.h"
#include "tests/common/ops/batched_attention_cases.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::BatchedCase;
using test::BatchedInputs;
using test::BatchedResult;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (const float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// How far each element of out and dqkv may be from the f32 reference: the first-order bounds above, element by
// element, from the inputs and the reference's P (f64 sums).
struct Bounds {
  std::vector<double> out, dqkv;
};

Bounds first_order_bounds(const BatchedCase& c, const BatchedInputs& in, const BatchedResult& ref) {
  const double ue = test::unit_roundoff(c.dtype) + 0x1p-16, scale = 1.0 / std::sqrt(static_cast<double>(c.HS));
  const int64_t C = c.NH * c.HS, T = c.T, HS = c.HS;
  const std::vector<float> qkv = in.qkv.to_floats(), dout = in.dout.to_floats(), probs = ref.probs.to_floats();
  const std::vector<float> out = ref.out.to_floats(), dqkv = ref.dqkv.to_floats();
  Bounds bounds{std::vector<double>(out.size()), std::vector<double>(dqkv.size())};
  for (size_t i = 0; i < out.size(); ++i) bounds.out[i] = ue * std::abs(out[i]);
  for (size_t i = 0; i < dqkv.size(); ++i) bounds.dqkv[i] = ue * std::abs(dqkv[i]);
  std::vector<double> dp(static_cast<size_t>(T * T)), e(static_cast<size_t>(T * T));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.NH; ++h) {
      const auto at = [&](int64_t t, int part, int64_t j) {
        return static_cast<size_t>((b * T + t) * 3 * C + part * C + h * HS + j);
      };
      const auto at_out = [&](int64_t t, int64_t j) { return static_cast<size_t>((b * T + t) * C + h * HS + j); };
      const float* p = probs.data() + (b * c.NH + h) * T * T;
      // dP = dO v^T, and E[t,s], the bound on dS's error: ue scale P (2 |dP - D| + sum_s' P |dP|).
      for (int64_t t = 0; t < T; ++t) {
        double d = 0, a = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t j = 0; j < HS; ++j) dot += double(dout[at_out(t, j)]) * qkv[at(s, 2, j)];
          dp[t * T + s] = dot;
          d += p[t * T + s] * dot;
          a += p[t * T + s] * std::abs(dot);
        }
        for (int64_t s = 0; s <= t; ++s)
          e[t * T + s] = ue * scale * p[t * T + s] * (2 * std::abs(dp[t * T + s] - d) + a);
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s <= t; ++s)
          for (int64_t j = 0; j < HS; ++j) {
            bounds.out[at_out(t, j)] += ue * p[t * T + s] * std::abs(qkv[at(s, 2, j)]);    // P's rounding, in out
            bounds.dqkv[at(s, 2, j)] += ue * p[t * T + s] * std::abs(dout[at_out(t, j)]);  // ... in dv
            bounds.dqkv[at(t, 0, j)] += e[t * T + s] * std::abs(qkv[at(s, 1, j)]);         // dS's, in dq
            bounds.dqkv[at(s, 1, j)] += e[t * T + s] * std::abs(qkv[at(t, 0, j)]);         // ... in dk
          }
    }
  return bounds;
}

// Every |actual - expected| within its bound; on failure, how many are not and the first few.
::testing::AssertionResult within_bounds(const char* what, const Tensor& actual, const Tensor& expected,
                                         const std::vector<double>& bound) {
  const std::vector<float> a = actual.to_floats(), x = expected.to_floats();
  int64_t bad = 0;
  std::string first;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::abs(double(a[i]) - x[i]) <= bound[i]) continue;  // false for NaN
    if (++bad <= 5) first += cat("\n  [", i, "] ", a[i], " vs ", x[i], " (bound ", bound[i], ")");
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << a.size() << " elements beyond their bound"
                                       << first;
}

// T = 1, 37, 130; 1 to 4 heads; head sizes 8, 16, 24, 64; both 16-bit dtypes.
const BatchedCase kCases[] = {{1, 1, 1, 8, DType::BF16},   {2, 37, 3, 16, DType::BF16},  {1, 130, 4, 64, DType::BF16},
                              {2, 37, 2, 64, DType::BF16}, {1, 130, 1, 24, DType::BF16}, {1, 1, 2, 16, DType::F16},
                              {2, 37, 3, 16, DType::F16},  {1, 130, 4, 64, DType::F16},  {3, 37, 4, 8, DType::F16},
                              {1, 130, 2, 24, DType::F16}};

class BatchedAttentionCpu : public ::testing::TestWithParam<BatchedCase> {};

TEST_P(BatchedAttentionCpu, MatchesF32AttentionOnRoundedInputs) {
  const BatchedCase c = GetParam();
  Rng rng(test_seed());
  const BatchedInputs in = test::random_batched_inputs(c, rng);
  const BatchedResult got = test::run_batched(in, c, Device::cpu());
  const BatchedResult ref = test::run_f32_attention(in, c);
  const Bounds bounds = first_order_bounds(c, in, ref);
  const double ue = test::unit_roundoff(c.dtype) + 0x1p-16;
  EXPECT_TRUE(test::causal_rows_sum_to_one(got.probs, c.dtype));
  EXPECT_TRUE(test::all_close("probs", got.probs, ref.probs, {ue, 0}));
  EXPECT_TRUE(within_bounds("out", got.out, ref.out, bounds.out));
  EXPECT_TRUE(within_bounds("dqkv", got.dqkv, ref.dqkv, bounds.dqkv));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchedAttentionCpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name(); });

// The backward adds into dqkv: from random values it ends at those values plus the gradient from zero, each sum
// rounded once more (within one 16-bit rounding of the sum, plus one of the gradient's own scale).
TEST(BatchedAttentionCpuAccumulation, BackwardAddsIntoDqkv) {
  const BatchedCase c{2, 37, 2, 16, DType::BF16};
  Rng rng(test_seed());
  BatchedInputs in = test::random_batched_inputs(c, rng);
  const std::vector<float> before = in.dqkv_before.to_floats();
  const std::vector<float> added = test::run_batched(in, c, Device::cpu()).dqkv.to_floats();
  in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
  const std::vector<float> alone = test::run_batched(in, c, Device::cpu()).dqkv.to_floats();
  std::vector<float> sum(alone.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = before[i] + alone[i];
  const double u = test::unit_roundoff(c.dtype);
  EXPECT_TRUE(test::all_close("dqkv", Tensor::from_floats(added, in.qkv.shape()),
                              Tensor::from_floats(sum, in.qkv.shape()), {u, u}));
  EXPECT_GT(max_abs(before), 1.0) << "the starting values must matter";
}

// GradWrite::Overwrite: from a dqkv of NaNs, every element written and none read, as adding into zeros (the f32
// path is the f32 op's, whose products then run with beta = 0).
TEST(BatchedAttentionCpuAccumulation, OverwriteWritesEveryElementAsAddingIntoZeros) {
  for (const DType dtype : {DType::BF16, DType::F32}) {
    const BatchedCase c{2, 37, 2, 16, dtype};
    const double u = dtype == DType::F32 ? 1e-6 : test::unit_roundoff(dtype);
    EXPECT_TRUE(test::overwrite_matches_adding_into_zeros(c, test_seed(), Device::cpu(), u)) << c.name();
  }
}

// f32 is the f32 op itself: the same values bit for bit.
TEST(BatchedAttentionCpuF32, IsTheF32Attention) {
  const BatchedCase c{2, 37, 3, 16, DType::F32};
  Rng rng(test_seed());
  const BatchedInputs in = test::random_batched_inputs(c, rng);
  const BatchedResult got = test::run_batched(in, c, Device::cpu()), ref = test::run_f32_attention(in, c);
  EXPECT_TRUE(test::all_close("probs", got.probs, ref.probs, {0, 0}));
  EXPECT_TRUE(test::all_close("out", got.out, ref.out, {0, 0}));
  EXPECT_TRUE(test::all_close("dqkv", got.dqkv, ref.dqkv, {0, 0}));
}

// One dtype for every tensor of a call; integers are refused too.
TEST(BatchedAttentionArguments, MixedOrIntegerDtypesAreInvalid) {
  const auto zeros = [](const Shape& shape, DType dtype) { return Tensor::zeros(shape, dtype); };
  const Tensor qkv = zeros({1, 4, 3 * 16}, DType::BF16), out = zeros({1, 4, 16}, DType::BF16);
  const Tensor probs = zeros({1, 2, 4, 4}, DType::BF16);
  using testing::expect_error;
  expect_error(
      [&] {
        ops::batched_attention_forward(out, zeros({1, 2, 4, 4}, DType::F16), qkv, 2);
      },
      ErrorKind::InvalidArgument, {"different dtypes", "bf16", "f16"});
  expect_error(
      [&] {
        ops::batched_attention_forward(zeros({1, 4, 16}, DType::F32), probs, qkv, 2);
      },
      ErrorKind::InvalidArgument, {"different dtypes", "f32"});
  expect_error([&] { ops::batched_attention_backward(zeros(qkv.shape(), DType::F32), out, qkv, probs, 2); },
               ErrorKind::InvalidArgument, {"different dtypes"});
  expect_error(
      [&] {
        ops::batched_attention_backward(zeros(qkv.shape(), DType::BF16), zeros({1, 4, 16}, DType::F16), qkv, probs, 2);
      },
      ErrorKind::InvalidArgument, {"different dtypes"});
  expect_error(
      [&] {
        ops::batched_attention_forward(zeros({1, 4, 16}, DType::I32), zeros({1, 2, 4, 4}, DType::I32),
                                       zeros({1, 4, 48}, DType::I32), 2);
      },
      ErrorKind::InvalidArgument, {"i32"});
  expect_error([&] { ops::batched_attention_forward(out, probs, qkv, 3); }, ErrorKind::InvalidArgument, {"n_head(3)"});
}

}  // namespace
}  // namespace lab
