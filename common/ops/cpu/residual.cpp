// CPU reference of common/ops/residual.h.
#include "common/ops/residual.h"

namespace lab::ops::cpu {

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* op = out.data<float>();
  const int64_t n = out.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) op[i] = ap[i] + bp[i];
}

void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const float* dp = dout.data<float>();
  float* ap = da.defined() ? da.data<float>() : nullptr;
  float* bp = db.defined() ? db.data<float>() : nullptr;
  const int64_t n = dout.numel();
  // One pass that reads each gradient before either write, as the CUDA kernel does: da or db may be the
  // very buffer dout lives in, and then both must still receive the original dout.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = dp[i];
    if (ap) ap[i] += g;
    if (bp) bp[i] += g;
  }
}

}  // namespace lab::ops::cpu
