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
  const int64_t n = dout.numel();
  for (const Tensor* g : {&da, &db}) {
    if (!g->defined()) continue;
    float* gp = g->data<float>();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) gp[i] += dp[i];
  }
}

}  // namespace lab::ops::cpu
