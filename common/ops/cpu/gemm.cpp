#include "common/ops/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "common/core/error.h"

#ifdef LAB_WITH_BLAS
#include <cblas.h>
#endif

namespace lab::ops::cpu {

// ---------------------------------------------------------------- portable fallback

// Without BLAS: copy op(B) into a row-major [K, N] panel once, then for each row of C stream through it with
// an i-p-j loop whose inner j loop is contiguous (vectorises). Rows of C are independent: parallel over M.
void sgemm_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  std::vector<float> b_panel(static_cast<size_t>(K * N));
  for (int64_t p = 0; p < K; ++p)
    for (int64_t j = 0; j < N; ++j) b_panel[p * N + j] = trans_b ? B[j * ldb + p] : B[p * ldb + j];
  const float* panel = b_panel.data();
#pragma omp parallel
  {
    std::vector<float> acc(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < K; ++p) {
        const float a = trans_a ? A[p * lda + i] : A[i * lda + p];
        const float* brow = panel + p * N;
        float* out = acc.data();
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) out[j] += a * brow[j];
      }
      float* crow = C + i * ldc;
      for (int64_t j = 0; j < N; ++j) crow[j] = alpha * acc[j] + (beta == 0.0f ? 0.0f : beta * crow[j]);
    }
  }
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#ifdef LAB_WITH_BLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
#else
  sgemm_portable(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

bool gemm_uses_blas() {
#ifdef LAB_WITH_BLAS
  return true;
#else
  return false;
#endif
}

// ---------------------------------------------------------------- recorder

namespace {
std::atomic<GemmRecorder*> g_recorder{nullptr};
}

GemmRecorder::GemmRecorder() {
  GemmRecorder* expected = nullptr;
  LAB_CHECK(g_recorder.compare_exchange_strong(expected, this), InvalidArgument,
            "only one GemmRecorder may be active at a time");
}

GemmRecorder::~GemmRecorder() {
  g_recorder.store(nullptr);
}

std::vector<GemmShape> GemmRecorder::shapes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shapes_;
}

void GemmRecorder::note(const GemmShape& shape) {
  GemmRecorder* r = g_recorder.load();
  if (!r) return;
  std::lock_guard<std::mutex> lock(r->mutex_);
  r->shapes_.push_back(shape);
}

}  // namespace lab::ops::cpu
