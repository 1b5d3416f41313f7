// Direct checks of CPU kernels against straightforward double-precision references: sgemm (BLAS and the
// portable fallback, all transposes), AdamW over several steps, and the reductions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/ops/adamw.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/cpu/vec_math.h"
#include "common/ops/reduce.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

std::vector<double> reference_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<float>& A,
                                   const std::vector<float>& B, const std::vector<float>& C0, float alpha, float beta) {
  std::vector<double> C(static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p)
        s += double(ta ? A[p * M + i] : A[i * K + p]) * (tb ? B[j * K + p] : B[p * N + j]);
      C[i * N + j] = alpha * s + beta * C0[i * N + j];
    }
  return C;
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {};

TEST_P(GemmTest, MatchesDoubleReference) {
  const auto [ta, tb, portable] = GetParam();
  Rng rng(100 + ta * 2 + tb);
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 5, 3}, {33, 65, 17}, {64, 48, 96}}) {
    std::vector<float> A(M * K), B(K * N), C(M * N);
    for (float& x : A) x = rng.normal();
    for (float& x : B) x = rng.normal();
    for (float& x : C) x = rng.normal();
    const float alpha = 0.5f, beta = 0.75f;
    const auto ref = reference_gemm(ta, tb, M, N, K, A, B, C, alpha, beta);
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    auto gemm = portable ? ops::cpu::sgemm_portable : ops::cpu::sgemm;
    gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), N);
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_NEAR(C[i], ref[i], 1e-4 * (1 + std::sqrt(double(K)))) << M << "x" << N << "x" << K << " at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool()));

TEST(CpuKernels, ExpFastIsAccurate) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01731f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(ops::cpu::exp_fast(x) - ref) / ref);
  }
  EXPECT_LT(worst, 5e-7);
}

TEST(CpuKernels, AdamWMatchesReferenceOverSteps) {
  Rng rng(200);
  const int64_t n = 1001;
  Tensor p = test::random_normal({n}, rng), m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  const std::vector<float> p0 = p.to_floats();
  std::vector<double> rp(p0.begin(), p0.end()), rm(n, 0.0), rv(n, 0.0);
  ops::AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  const float scale = 0.8f;
  for (int step = 1; step <= 5; ++step) {
    Tensor g = test::random_normal({n}, rng);
    const std::vector<float> gv = g.to_floats();
    h.step = step;
    ops::adamw_update(p, g, m, v, h, scale);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = double(gv[i]) * scale;
      rm[i] = h.beta1 * rm[i] + (1 - h.beta1) * gi;
      rv[i] = h.beta2 * rv[i] + (1 - h.beta2) * gi * gi;
      const double mh = rm[i] / (1 - std::pow(h.beta1, step)), vh = rv[i] / (1 - std::pow(h.beta2, step));
      rp[i] -= h.lr * (mh / (std::sqrt(vh) + h.eps) + h.weight_decay * rp[i]);
    }
  }
  const std::vector<float> pv = p.to_floats();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(pv[i], rp[i], 1e-5) << i;
}

TEST(CpuKernels, ReductionsMatchDouble) {
  Rng rng(300);
  for (int64_t n : {1, 4095, 4096, 4097, 100003}) {
    Tensor x = test::random_normal({n}, rng);
    double s = 0, s2 = 0;
    for (float v : x.to_floats()) {
      s += v;
      s2 += double(v) * v;
    }
    EXPECT_NEAR(ops::sum(x), s, 1e-6 * n) << n;
    EXPECT_NEAR(ops::sum_squares(x), s2, 1e-6 * s2) << n;
  }
}

TEST(CpuKernels, GemmRecorderSeesLinearShapes) {
  ops::cpu::GemmRecorder recorder;
  ops::cpu::GemmRecorder::note({false, true, 2, 3, 4, false});
  ASSERT_EQ(recorder.shapes().size(), 1u);
  EXPECT_EQ(recorder.shapes()[0].flops(), 48.0);
  EXPECT_THROW(ops::cpu::GemmRecorder second, Error);
}

}  // namespace
}  // namespace lab
