// CPU reference of common/ops/layernorm.h.
//
// Forward: one row per iteration (two passes over the row: mean, then variance; numerically safer than
// E[x^2] - E[x]^2). Backward: dx is per row; dw/db are column sums, computed by column slices so the order
// of summation is fixed (deterministic whatever the thread count).
#include "common/ops/layernorm.h"

#include <algorithm>
#include <cmath>

namespace lab::ops::cpu {

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  const int64_t C = x.dim(-1), N = x.numel() / C;
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = b.data<float>();
  float* op = out.data<float>();
  float* mp = mean.data<float>();
  float* rp = rstd.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = xp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += row[c];
    const float m = sum / static_cast<float>(C);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + kLayerNormEps);
    float* orow = op + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) orow[c] = (row[c] - m) * s * wp[c] + bp[c];
    mp[n] = m;
    rp[n] = s;
  }
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.dim(-1), N = x.numel() / C;
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* dp = dout.data<float>();
  const float* mp = mean.data<float>();
  const float* rp = rstd.data<float>();
  float* dxp = dx.data<float>();
  float* dwp = dw.data<float>();
  float* dbp = db.data<float>();

  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  with g = dout * w
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = xp + n * C;
    const float* drow = dp + n * C;
    const float m = mp[n], s = rp[n];
    float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
    for (int64_t c = 0; c < C; ++c) {
      const float g = drow[c] * wp[c];
      g_mean += g;
      gx_mean += g * (row[c] - m) * s;
    }
    g_mean /= static_cast<float>(C);
    gx_mean /= static_cast<float>(C);
    float* dxrow = dxp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (row[c] - m) * s;
      dxrow[c] += s * (drow[c] * wp[c] - g_mean - xhat * gx_mean);
    }
  }

  constexpr int64_t kSlice = 64;
  const int64_t slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int64_t sl = 0; sl < slices; ++sl) {
    const int64_t c0 = sl * kSlice, c1 = std::min(C, c0 + kSlice);
    float dw_acc[kSlice] = {}, db_acc[kSlice] = {};
    for (int64_t n = 0; n < N; ++n) {
      const float* row = xp + n * C;
      const float* drow = dp + n * C;
      const float m = mp[n], s = rp[n];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        dw_acc[c - c0] += drow[c] * (row[c] - m) * s;
        db_acc[c - c0] += drow[c];
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dwp[c] += dw_acc[c - c0];
      dbp[c] += db_acc[c - c0];
    }
  }
}

}  // namespace lab::ops::cpu
