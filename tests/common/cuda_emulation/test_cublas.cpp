// The cuBLAS stand-in: SGEMM against a plain triple loop at odd shapes (tile edges of the blocked GEMM)
// with every transpose, beta = 0 with NaN in C, alpha = 0 with NaN in A, strided batches, TF32 rounding,
// the argument checks of cuBLAS, the handle's stream, and a host pointer given as an operand.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/cuda/emulation/gemm.h"
#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A column-major rows x cols matrix stored with leading dimension ld; the padding rows hold NaN, so a GEMM
// that reads outside the matrix poisons its result.
std::vector<float> random_matrix(int rows, int cols, int ld, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> m(static_cast<size_t>(ld) * cols, kNaN);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) m[static_cast<size_t>(i + j * ld)] = normal(rng);
  return m;
}

// op(X)(i, j) of a column-major X.
float op_at(const std::vector<float>& x, int ld, cublasOperation_t op, int i, int j) {
  return op == CUBLAS_OP_N ? x[static_cast<size_t>(i + j * ld)] : x[static_cast<size_t>(j + i * ld)];
}

// The reference: C = alpha op(A) op(B) + beta C in double, and a bound on the rounding error of any fp32
// evaluation order: (k + 2) units in the last place of the sum of the terms' magnitudes.
struct Reference {
  std::vector<double> value;
  std::vector<double> bound;
};

Reference triple_loop(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                      const std::vector<float>& a, int lda, const std::vector<float>& b, int ldb, float beta,
                      const std::vector<float>& c, int ldc) {
  Reference r{std::vector<double>(static_cast<size_t>(m) * n), std::vector<double>(static_cast<size_t>(m) * n)};
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0.0, magnitude = 0.0;
      for (int p = 0; p < k; ++p) {
        const double t = static_cast<double>(op_at(a, lda, ta, i, p)) * op_at(b, ldb, tb, p, j);
        sum += t;
        magnitude += std::fabs(t);
      }
      const double cij = beta == 0.0f ? 0.0 : static_cast<double>(beta) * c[static_cast<size_t>(i + j * ldc)];
      r.value[static_cast<size_t>(i + j * m)] = alpha * sum + cij;
      r.bound[static_cast<size_t>(i + j * m)] =
          (k + 2) * 0x1p-23 * (std::fabs(alpha) * magnitude + std::fabs(cij)) + 1e-30;
    }
  }
  return r;
}

class Cublas : public EmulationTest {
 protected:
  void SetUp() override {
    EmulationTest::SetUp();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS);
    EmulationTest::TearDown();
  }
  cublasHandle_t handle_ = nullptr;
  std::mt19937 rng_{1234};
};

struct Shape {
  int m, n, k;
};

TEST_F(Cublas, SgemmMatchesATripleLoopForEveryTransposeAndOddShapes) {
  // Edges of the blocked GEMM: micro-tiles of 32 (or 16) x 6, tiles of 128 x 192, slices of 256 along k.
  const Shape shapes[] = {{1, 1, 1}, {7, 13, 5}, {33, 7, 1}, {129, 193, 257}, {17, 200, 300}, {250, 5, 31}};
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  for (const Shape& s : shapes) {
    for (const cublasOperation_t ta : ops) {
      for (const cublasOperation_t tb : ops) {
        const int rows_a = ta == CUBLAS_OP_N ? s.m : s.k, cols_a = ta == CUBLAS_OP_N ? s.k : s.m;
        const int rows_b = tb == CUBLAS_OP_N ? s.k : s.n, cols_b = tb == CUBLAS_OP_N ? s.n : s.k;
        const int lda = rows_a + 3, ldb = rows_b + 1, ldc = s.m + 2;
        const std::vector<float> a = random_matrix(rows_a, cols_a, lda, rng_);
        const std::vector<float> b = random_matrix(rows_b, cols_b, ldb, rng_);
        const std::vector<float> c = random_matrix(s.m, s.n, ldc, rng_);
        DeviceBuffer<float> da(a), db(b), dc(c);
        const float alpha = 1.5f, beta = -0.5f;
        ASSERT_EQ(
            cublasSgemm(handle_, ta, tb, s.m, s.n, s.k, &alpha, da.get(), lda, db.get(), ldb, &beta, dc.get(), ldc),
            CUBLAS_STATUS_SUCCESS);
        const std::vector<float> got = dc.download();
        const Reference ref = triple_loop(ta, tb, s.m, s.n, s.k, alpha, a, lda, b, ldb, beta, c, ldc);
        int bad = 0;
        for (int j = 0; j < s.n; ++j) {
          for (int i = 0; i < s.m; ++i) {
            const size_t r = static_cast<size_t>(i + j * s.m);
            const double diff = std::fabs(got[static_cast<size_t>(i + j * ldc)] - ref.value[r]);
            if (!(diff <= ref.bound[r]) && ++bad <= 3)
              ADD_FAILURE() << s.m << "x" << s.n << "x" << s.k << " ops " << ta << tb << " C(" << i << "," << j
                            << ") = " << got[static_cast<size_t>(i + j * ldc)] << ", expected " << ref.value[r];
          }
          for (int i = s.m; i < ldc; ++i)
            ASSERT_TRUE(std::isnan(got[static_cast<size_t>(i + j * ldc)]))
                << "wrote outside C (padding row " << i << ")";
        }
        ASSERT_EQ(bad, 0);
      }
    }
  }
}

TEST_F(Cublas, BetaZeroNeverReadsCAndAlphaZeroNeverReadsAOrB) {
  const int m = 40, n = 30, k = 20;
  const std::vector<float> a = random_matrix(m, k, m, rng_), b = random_matrix(k, n, k, rng_);
  DeviceBuffer<float> da(a), db(b), dc(std::vector<float>(m * n, kNaN));
  const float one = 1.0f, zero = 0.0f, two = 2.0f;
  ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da.get(), m, db.get(), k, &zero, dc.get(), m),
            CUBLAS_STATUS_SUCCESS);
  for (const float v : dc.download()) ASSERT_FALSE(std::isnan(v)) << "NaN in C leaked through beta = 0";

  DeviceBuffer<float> nan_a(std::vector<float>(m * k, kNaN)), dc2(std::vector<float>(m * n, 3.0f));
  ASSERT_EQ(
      cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &zero, nan_a.get(), m, db.get(), k, &two, dc2.get(), m),
      CUBLAS_STATUS_SUCCESS);
  for (const float v : dc2.download()) ASSERT_EQ(v, 6.0f) << "alpha = 0 must give beta * C";
}

TEST_F(Cublas, StridedBatchedSgemmComputesEveryBatch) {
  const int m = 19, n = 23, k = 29, batch = 3;
  const long long sa = m * k + 5, sb = k * n, sc = m * n + 7;
  const std::vector<float> a = random_matrix(m, k * batch + 1, m, rng_), b = random_matrix(k, n * batch, k, rng_);
  std::vector<float> c(static_cast<size_t>(sc * batch), 1.0f);
  DeviceBuffer<float> da(a), db(b), dc(c);
  const float alpha = 1.0f, beta = 0.25f;
  ASSERT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.get(), m, sa, db.get(), k,
                                      sb, &beta, dc.get(), m, sc, batch),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = dc.download();
  for (int i = 0; i < batch; ++i) {
    const std::vector<float> ai(a.begin() + i * sa, a.begin() + i * sa + m * k);
    const std::vector<float> bi(b.begin() + i * sb, b.begin() + i * sb + k * n);
    const std::vector<float> ci(c.begin() + i * sc, c.begin() + i * sc + m * n);
    const Reference ref = triple_loop(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, alpha, ai, m, bi, k, beta, ci, m);
    for (int e = 0; e < m * n; ++e)
      ASSERT_NEAR(got[static_cast<size_t>(i * sc + e)], ref.value[static_cast<size_t>(e)],
                  ref.bound[static_cast<size_t>(e)])
          << "batch " << i << " element " << e;
    EXPECT_EQ(got[static_cast<size_t>(i * sc + m * n)], 1.0f) << "the gap between batches is not C";
  }
}

TEST(Tf32, RoundsToTenMantissaBitsToNearestEven) {
  EXPECT_EQ(round_to_tf32(1.0f + 0x1p-11f), 1.0f);                              // a tie: to even
  EXPECT_EQ(round_to_tf32(1.0f + 3 * 0x1p-11f), 1.0f + 0x1p-9f);                // a tie: to even (up)
  EXPECT_EQ(round_to_tf32(1.0f + 0x1p-11f + 0x1p-20f), 1.0f + 0x1p-10f);        // above half: up
  EXPECT_EQ(round_to_tf32(-(1.0f + 0x1p-11f + 0x1p-20f)), -(1.0f + 0x1p-10f));  // symmetric
  EXPECT_EQ(round_to_tf32(0x1p-130f), 0x1p-130f);                               // subnormals keep their top bits
  EXPECT_TRUE(std::isnan(round_to_tf32(kNaN)));
  EXPECT_EQ(round_to_tf32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to_tf32(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity());
}

// 1 + 2^-11 needs 11 mantissa bits: every partial sum of 512 such products is exact in fp32, so strict
// math gives exactly 512.25; TF32 rounds the input to 1 and gives 512.
TEST_F(Cublas, Tf32MathModeRoundsTheInputs) {
  const int n = 512;
  DeviceBuffer<float> a(std::vector<float>(n * n, 1.0f + 0x1p-11f)), b(std::vector<float>(n * n, 1.0f)), c(n * n);
  const float one = 1.0f, zero = 0.0f;
  for (const cublasMath_t mode : {CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH}) {
    ASSERT_EQ(cublasSetMathMode(handle_, mode), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, b.get(), n, a.get(), n, &zero, c.get(), n),
              CUBLAS_STATUS_SUCCESS);
    const float expected = mode == CUBLAS_DEFAULT_MATH ? 512.25f : 512.0f;
    for (const float v : c.download()) ASSERT_EQ(v, expected) << "math mode " << mode;
  }
}

TEST_F(Cublas, ArgumentsAreCheckedAsCublasChecksThem) {
  DeviceBuffer<float> x(64 * 64);
  const float one = 1.0f;
  const auto gemm = [&](cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda,
                        int ldb, int ldc) {
    return cublasSgemm(h, ta, tb, m, n, k, &one, x.get(), lda, x.get(), ldb, &one, x.get(), ldc);
  };
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  EXPECT_EQ(gemm(handle_, N, N, 8, 8, 8, 8, 8, 8), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(handle_, N, N, -1, 8, 8, 8, 8, 8), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(handle_, N, N, 8, -1, 8, 8, 8, 8), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(handle_, N, N, 8, 8, -1, 8, 8, 8), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(handle_, N, N, 8, 8, 4, 7, 4, 8), CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  EXPECT_EQ(gemm(handle_, T, N, 8, 8, 4, 3, 4, 8), CUBLAS_STATUS_INVALID_VALUE);  // lda < k (A transposed)
  EXPECT_EQ(gemm(handle_, T, N, 8, 8, 4, 4, 4, 8), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(handle_, N, N, 8, 8, 4, 8, 3, 8), CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
  EXPECT_EQ(gemm(handle_, N, T, 8, 6, 4, 8, 5, 8), CUBLAS_STATUS_INVALID_VALUE);  // ldb < n (B transposed)
  EXPECT_EQ(gemm(handle_, N, N, 8, 8, 4, 8, 4, 7), CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  EXPECT_EQ(gemm(handle_, N, N, 0, 0, 0, 0, 1, 1), CUBLAS_STATUS_INVALID_VALUE);  // lda < max(1, 0)
  EXPECT_EQ(gemm(handle_, N, N, 0, 0, 0, 1, 1, 1), CUBLAS_STATUS_SUCCESS);        // an empty product
  EXPECT_EQ(gemm(handle_, static_cast<cublasOperation_t>(7), N, 8, 8, 8, 8, 8, 8), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(
      cublasSgemmStridedBatched(handle_, N, N, 8, 8, 8, &one, x.get(), 8, 64, x.get(), 8, 64, &one, x.get(), 8, 64, -1),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(nullptr, N, N, 8, 8, 8, 8, 8, 8), CUBLAS_STATUS_NOT_INITIALIZED);
  cublasHandle_t destroyed = nullptr;
  ASSERT_EQ(cublasCreate(&destroyed), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(destroyed), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(destroyed, N, N, 8, 8, 8, 8, 8, 8), CUBLAS_STATUS_NOT_INITIALIZED);

  EXPECT_EQ(cublasSetMathMode(handle_, static_cast<cublasMath_t>(9)), CUBLAS_STATUS_INVALID_VALUE);
  cublasMath_t mode{};
  ASSERT_EQ(cublasSetMathMode(handle_, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetMathMode(handle_, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_TF32_TENSOR_OP_MATH);
  EXPECT_EQ(cublasSetWorkspace(handle_, reinterpret_cast<char*>(x.get()) + 4, 1024), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle_, x.get(), 1024), CUBLAS_STATUS_SUCCESS);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
}

TEST_F(Cublas, WorkIsQueuedOnTheHandlesStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  cudaStream_t bound = nullptr;
  ASSERT_EQ(cublasGetStream(handle_, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, stream);
  DeviceBuffer<float> a(std::vector<float>(16, 1.0f)), c(std::vector<float>(16, 0.0f));
  PinnedBuffer<float> seen(1);
  const float one = 1.0f, zero = 0.0f;
  {
    StreamGate gate(stream);
    ASSERT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.get(), 4, a.get(), 4, &zero, c.get(), 4),
              CUBLAS_STATUS_SUCCESS);
    // Read on the legacy stream, which does not wait for a non-blocking one, into pinned memory (a copy into
    // pageable memory would wait for the gate's host function).
    ASSERT_EQ(cudaMemcpyAsync(seen.get(), c.get(), sizeof(float), cudaMemcpyDeviceToHost, cudaStreamLegacy),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
    EXPECT_EQ(seen[0], 0.0f) << "the GEMM ran before the work queued ahead of it on its stream";
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(c.download()[0], 4.0f);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(Cublas, AHostOperandIsAFaultNamingIt) {
  DeviceBuffer<float> a(64), c(64);
  std::vector<float> host(64, 1.0f);
  const float one = 1.0f, zero = 0.0f;
  EXPECT_EQ(
      cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, a.get(), 8, host.data(), 8, &zero, c.get(), 8),
      CUBLAS_STATUS_SUCCESS);  // queued, as on a GPU; the fault surfaces at the next synchronisation
  expect_fault(cudaErrorIllegalAddress, {"cublasSgemm", "operand B", "not inside device memory"});
}

}  // namespace
}  // namespace lab::cuda::emu::test
