// CPU reference of common/ops/gelu.h (tanh approximation, vectorised through tanh_fast).
#include "common/ops/gelu.h"

#include <cmath>

#include "common/ops/cpu/vec_math.h"

namespace lab::ops::cpu {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(const Tensor& out, const Tensor& x) {
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = xp[i];
    op[i] = 0.5f * v * (1.0f + tanh_fast(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  const float* xp = x.data<float>();
  const float* dp = dout.data<float>();
  float* dxp = dx.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = xp[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    const float t = tanh_fast(u);
    const float sech2 = 1.0f - t * t;
    const float grad = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dxp[i] += grad * dp[i];
  }
}

}  // namespace lab::ops::cpu
