// CPU reference of common/ops/layernorm.h, for f32, bf16 and f16 activations with fp32 arithmetic.
//
// Forward: one row per iteration (two passes over the row: mean, then variance; numerically safer than
// E[x^2] - E[x]^2). Backward: dx is per row; dw/db are column sums, computed by column slices so the order
// of summation is fixed (deterministic whatever the thread count).
#include "common/ops/layernorm.h"

#include <algorithm>
#include <cmath>

#include "common/ops/dispatch.h"

namespace lab::ops::cpu {

namespace {

template <typename T>
void forward(T* op, float* mp, float* rp, const T* xp, const float* wp, const float* bp, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* row = xp + n * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < C; ++c) sum += to_float(row[c]);
    const float m = sum / static_cast<float>(C);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t c = 0; c < C; ++c) var += (to_float(row[c]) - m) * (to_float(row[c]) - m);
    const float s = 1.0f / std::sqrt(var / static_cast<float>(C) + kLayerNormEps);
    T* orow = op + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) orow[c] = from_float<T>((to_float(row[c]) - m) * s * wp[c] + bp[c]);
    mp[n] = m;
    rp[n] = s;
  }
}

template <typename T>
void backward(T* dxp, float* dwp, float* dbp, const T* dp, const T* xp, const float* wp, const float* mp,
              const float* rp, int64_t N, int64_t C, bool add, bool add_params) {
  // dx (+)= rstd * (g - mean(g) - xhat * mean(g * xhat)),  with g = dout * w
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* row = xp + n * C;
    const T* drow = dp + n * C;
    const float m = mp[n], s = rp[n];
    float g_mean = 0.0f, gx_mean = 0.0f;
#pragma omp simd reduction(+ : g_mean, gx_mean)
    for (int64_t c = 0; c < C; ++c) {
      const float g = to_float(drow[c]) * wp[c];
      g_mean += g;
      gx_mean += g * (to_float(row[c]) - m) * s;
    }
    g_mean /= static_cast<float>(C);
    gx_mean /= static_cast<float>(C);
    T* dxrow = dxp + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (to_float(row[c]) - m) * s;
      dxrow[c] =
          from_float<T>((add ? to_float(dxrow[c]) : 0.0f) + s * (to_float(drow[c]) * wp[c] - g_mean - xhat * gx_mean));
    }
  }

  // dw and db accumulate in f32 whatever T is: they are sums over all N rows.
  constexpr int64_t kSlice = 64;
  const int64_t slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int64_t sl = 0; sl < slices; ++sl) {
    const int64_t c0 = sl * kSlice, c1 = std::min(C, c0 + kSlice);
    float dw_acc[kSlice] = {}, db_acc[kSlice] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* row = xp + n * C;
      const T* drow = dp + n * C;
      const float m = mp[n], s = rp[n];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        const float d = to_float(drow[c]);
        dw_acc[c - c0] += d * (to_float(row[c]) - m) * s;
        db_acc[c - c0] += d;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dwp[c] = add_params ? dwp[c] + dw_acc[c - c0] : dw_acc[c - c0];
      dbp[c] = add_params ? dbp[c] + db_acc[c - c0] : db_acc[c - c0];
    }
  }
}

}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  const int64_t C = x.dim(-1), N = x.numel() / C;
  dispatch_float_dtype(x.dtype(), "layernorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward(out.data<T>(), mean.data<float>(), rstd.data<float>(), x.data<T>(), w.data<float>(), b.data<float>(), N, C);
  });
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write,
                        GradWrite dparams_write) {
  const int64_t C = x.dim(-1), N = x.numel() / C;
  dispatch_float_dtype(x.dtype(), "layernorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward(dx.data<T>(), dw.data<float>(), db.data<float>(), dout.data<T>(), x.data<T>(), w.data<float>(),
             mean.data<float>(), rstd.data<float>(), N, C, dx_write == GradWrite::Add, dparams_write == GradWrite::Add);
  });
}

}  // namespace lab::ops::cpu
