// Single-precision GEMM on the CPU: OpenBLAS's cblas_sgemm when the build has it, else a portable
// (packed, OpenMP-parallel, vectorisable) loop nest that is correct but several times slower.
//
// Row-major:  C[M,N] = alpha * op(A) @ op(B) + beta * C,   op(X) = X or X^T.
// lda/ldb/ldc are row strides in elements, as in CBLAS.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace lab::ops::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The portable loop nest sgemm falls back to without BLAS (always built, so tests can compare the two).
void sgemm_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// True when sgemm goes through BLAS.
bool gemm_uses_blas();

// ---------------------------------------------------------------- recording GEMM shapes
// The GPT-2 step benchmark measures its "GEMM floor": the time the step's own matrix products take when
// run alone. While a GemmRecorder is alive, the linear layers report the shape of every sgemm they issue.
struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  bool accumulate = false;  // beta = 1 (C += ...) rather than beta = 0
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
  bool operator==(const GemmShape&) const = default;
};

class GemmRecorder {
 public:
  GemmRecorder();
  ~GemmRecorder();
  GemmRecorder(const GemmRecorder&) = delete;
  GemmRecorder& operator=(const GemmRecorder&) = delete;
  std::vector<GemmShape> shapes() const;

  static void note(const GemmShape& shape);  // no-op unless a recorder is alive

 private:
  mutable std::mutex mutex_;
  std::vector<GemmShape> shapes_;
};

}  // namespace lab::ops::cpu
