// CPU reference of common/ops/gelu.h (tanh approximation in its sigmoid form, vectorised through exp_fast).
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
    op[i] = v / (1.0f + exp_fast(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));  // v * sigmoid(2u), see gelu.h
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
    // d/dv [v s(2u)] = s + 2 v s (1 - s) u',  s = sigmoid(2u) = 0.5 (1 + tanh u)
    const float s = 1.0f / (1.0f + exp_fast(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
    const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dxp[i] += grad * dp[i];
  }
}

}  // namespace lab::ops::cpu
