// CUDA kernels of common/ops/layernorm.h.
//
// Forward and the dx part of the backward: one warp per row, kRowsPerBlock rows per block. The 32 lanes
// stride over the row's C channels (coalesced), and warp shuffles combine their partial sums, with no
// shared memory and no block barrier; a warp whose row is past the end leaves as a whole. The forward
// makes two passes for the statistics (mean, then the variance around it: numerically safer than
// E[x^2] - E[x]^2) and a third to write; the row stays in L1/L2 between passes.
//
// dw and db are column sums over all N rows, both in one pass over dout and x (column_sums.cuh: the rows
// split over enough blocks to fill the GPU, partial sums, then a small kernel adds them in a fixed order:
// deterministic, no atomics).
#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/layernorm.h"

namespace lab::ops::cuda {

namespace {

constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

// ---------------------------------------------------------------- kernels

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* x, const float* w,
                                         const float* b, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* xr = x + row * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) sum += xr[c];
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float d = xr[c] - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kLayerNormEps);
  float* outr = out + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) outr[c] = (xr[c] - m) * s * w[c] + b[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  with g = dout * w
__global__ void layernorm_backward_dx_kernel(float* dx, const float* dout, const float* x, const float* w,
                                             const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* xr = x + row * C;
  const float* dr = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float g = dr[c] * w[c];
    g_sum += g;
    gx_sum += g * (xr[c] - m) * s;
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
  float* dxr = dx + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float xhat = (xr[c] - m) * s;
    dxr[c] += s * (dr[c] * w[c] - g_mean - xhat * gx_mean);
  }
}

// The summands of dw[c] += sum_n dout[n, c] * xhat[n, c] and db[c] += sum_n dout[n, c].
struct WeightAndBiasTerms {
  const float* dout;
  const float* x;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void add(int64_t n, int64_t c, float (&part)[2]) const {
    const float d = dout[n * C + c];
    part[0] += d * (x[n * C + c] - mean[n]) * rstd[n];
    part[1] += d;
  }
};

}  // namespace

// ---------------------------------------------------------------- launchers

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  LAB_LAUNCH(layernorm_forward_kernel, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()}, out.data<float>(),
             mean.data<float>(), rstd.data<float>(), x.data<float>(), w.data<float>(), b.data<float>(), N, C);
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  LAB_LAUNCH(layernorm_backward_dx_kernel, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
             dx.data<float>(), dout.data<float>(), x.data<float>(), w.data<float>(), mean.data<float>(),
             rstd.data<float>(), N, C);
  add_column_sums<2>({{dw.data<float>(), db.data<float>()}},
                     WeightAndBiasTerms{dout.data<float>(), x.data<float>(), mean.data<float>(), rstd.data<float>(), C},
                     N, C, x.device(), scope.stream());
}

}  // namespace lab::ops::cuda
