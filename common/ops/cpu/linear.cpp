// CPU reference of common/ops/linear.h: three sgemm calls and a bias reduction.
//
// Forward writes the bias into `out` first and lets the GEMM accumulate onto it (beta = 1), which saves a
// separate pass over the output. The bias gradient is a column sum, split by column slices so that each
// thread sums its columns over all rows in a fixed order (deterministic).
#include "common/ops/linear.h"

#include <algorithm>

#include "common/ops/cpu/gemm.h"

namespace lab::ops::cpu {

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  const int64_t OC = weight.dim(0), C = weight.dim(1), N = inp.numel() / C;
  float* o = out.data<float>();
  if (bias.defined()) {
    const float* b = bias.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) std::copy(b, b + OC, o + n * OC);
  }
  GemmRecorder::note({false, true, N, OC, C, bias.defined()});
  sgemm(false, true, N, OC, C, 1.0f, inp.data<float>(), C, weight.data<float>(), C, bias.defined() ? 1.0f : 0.0f, o,
        OC);
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight) {
  const int64_t OC = weight.dim(0), C = weight.dim(1), N = inp.numel() / C;
  const float* d = dout.data<float>();
  if (dinp.defined()) {  // dinp[N,C] += dout[N,OC] @ weight[OC,C]
    GemmRecorder::note({false, false, N, C, OC, true});
    sgemm(false, false, N, C, OC, 1.0f, d, OC, weight.data<float>(), C, 1.0f, dinp.data<float>(), C);
  }
  if (dweight.defined()) {  // dweight[OC,C] += dout^T[OC,N] @ inp[N,C]
    GemmRecorder::note({true, false, OC, C, N, true});
    sgemm(true, false, OC, C, N, 1.0f, d, OC, inp.data<float>(), C, 1.0f, dweight.data<float>(), C);
  }
  if (dbias.defined()) {
    constexpr int64_t kSlice = 256;
    float* db = dbias.data<float>();
    const int64_t slices = (OC + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < slices; ++s) {
      const int64_t j0 = s * kSlice, j1 = std::min(OC, j0 + kSlice);
      float acc[kSlice] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* row = d + n * OC;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += row[j];
      }
      for (int64_t j = j0; j < j1; ++j) db[j] += acc[j - j0];
    }
  }
}

}  // namespace lab::ops::cpu
