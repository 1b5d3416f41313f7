// CPU reference of common/ops/gelu.h (tanh approximation in its sigmoid form, vectorised through exp_fast), for
// f32, bf16 and f16 storage with fp32 arithmetic.
#include "common/ops/gelu.h"

#include <cmath>

#include "common/ops/cpu/vec_math.h"
#include "common/ops/dispatch.h"

namespace lab::ops::cpu {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <typename T>
void forward(T* op, const T* xp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(xp[i]);
    // v * sigmoid(2u), see gelu.h
    op[i] = from_float<T>(v / (1.0f + exp_fast(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v))));
  }
}

template <typename T>
void backward(T* dxp, const T* xp, const T* dp, int64_t n, bool add) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float v = to_float(xp[i]);
    // d/dv [v s(2u)] = s + 2 v s (1 - s) u',  s = sigmoid(2u) = 0.5 (1 + tanh u)
    const float s = 1.0f / (1.0f + exp_fast(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
    const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dxp[i] = from_float<T>((add ? to_float(dxp[i]) : 0.0f) + grad * to_float(dp[i]));
  }
}

}  // namespace

void gelu_forward(const Tensor& out, const Tensor& x) {
  dispatch_float_dtype(x.dtype(), "gelu_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward(out.data<T>(), x.data<T>(), x.numel());
  });
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write) {
  dispatch_float_dtype(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward(dx.data<T>(), x.data<T>(), dout.data<T>(), x.numel(), dx_write == GradWrite::Add);
  });
}

}  // namespace lab::ops::cpu
