// CPU reference of common/ops/residual.h, for f32, bf16 and f16 storage with fp32 arithmetic.
#include "common/ops/residual.h"

#include "common/core/parallel.h"
#include "common/ops/dispatch.h"

namespace lab::ops::cpu {

namespace {

template <typename T>
void forward(T* op, const T* ap, const T* bp, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) op[i] = from_float<T>(to_float(ap[i]) + to_float(bp[i]));
}

template <typename T>
void backward(T* ap, T* bp, const T* dp, int64_t n) {
  // One pass that reads each gradient before either write, as the CUDA kernel does: da or db may be the
  // very buffer dout lives in, and then both must still receive the original dout.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = to_float(dp[i]);
    if (ap) ap[i] = from_float<T>(to_float(ap[i]) + g);
    if (bp) bp[i] = from_float<T>(to_float(bp[i]) + g);
  }
}

}  // namespace

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_float_dtype(out.dtype(), "residual_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward(out.data<T>(), a.data<T>(), b.data<T>(), out.numel());
  });
}

void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  dispatch_float_dtype(dout.dtype(), "residual_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward(da.defined() ? da.data<T>() : nullptr, db.defined() ? db.data<T>() : nullptr, dout.data<T>(),
             dout.numel());
  });
}

void residual_gradient_copy(const Tensor& dx, const Tensor& dout) {
  parallel_memcpy(dx.raw(), dout.raw(), dout.nbytes());
}

}  // namespace lab::ops::cpu
