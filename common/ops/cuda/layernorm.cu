// CUDA kernels of common/ops/layernorm.h, for f32, bf16 and f16 activations with fp32 arithmetic
// (dtype_dispatch.cuh); weight, bias, their gradients and the statistics are f32 whatever the activations are.
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
#include <cstdint>

#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/layernorm.h"

namespace lab::ops::cuda {

namespace {

constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

// ---------------------------------------------------------------- kernels

template <typename D>
__global__ void layernorm_forward_kernel(D* out, float* mean, float* rstd, const D* x, const float* w, const float* b,
                                         int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const D* xr = x + row * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) sum += load(xr[c]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float d = load(xr[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kLayerNormEps);
  D* outr = out + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) outr[c] = store_as<D>((load(xr[c]) - m) * s * w[c] + b[c]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  with g = dout * w
template <typename D>
__global__ void layernorm_backward_dx_kernel(D* dx, const D* dout, const D* x, const float* w, const float* mean,
                                             const float* rstd, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const D* xr = x + row * C;
  const D* dr = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float g = load(dr[c]) * w[c];
    g_sum += g;
    gx_sum += g * (load(xr[c]) - m) * s;
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
  D* dxr = dx + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float xhat = (load(xr[c]) - m) * s;
    dxr[c] = store_as<D>(load(dxr[c]) + s * (load(dr[c]) * w[c] - g_mean - xhat * gx_mean));
  }
}

// The same for rows that split into 16-byte pieces (C a multiple of 16 / sizeof(D), rows 16-byte aligned), at most
// kPieces per lane: each lane loads its pieces of x and dout once, in 16-byte loads, and keeps them in registers
// for the second half, where the loop above reads the row twice in loads of one element (2 bytes a lane in
// 16 bits: on an H200 that kernel moved about 0.25 TB/s, 198 us a call at GPT-2's 8192 x 768 in bf16).
template <typename D, int kPieces>
__global__ void layernorm_backward_dx_pieces_kernel(D* dx, const D* dout, const D* x, const float* w, const float* mean,
                                                    const float* rstd, int64_t N, int pieces) {
  constexpr int kPer = Piece<D>::kElements;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const int64_t C = static_cast<int64_t>(pieces) * kPer;
  const Piece<D>* xr = reinterpret_cast<const Piece<D>*>(x + row * C);
  const Piece<D>* dr = reinterpret_cast<const Piece<D>*>(dout + row * C);
  const float m = mean[row], s = rstd[row];
  Piece<D> xv[kPieces] = {}, dv[kPieces] = {};  // only the pieces below `pieces` are read
  float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int piece = lane + p * kWarpSize;
    if (piece >= pieces) continue;
    xv[p] = xr[piece];
    dv[p] = dr[piece];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const float g = load(dv[p].e[e]) * w[piece * kPer + e];
      g_sum += g;
      gx_sum += g * (load(xv[p].e[e]) - m) * s;
    }
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
  Piece<D>* dxr = reinterpret_cast<Piece<D>*>(dx + row * C);
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int piece = lane + p * kWarpSize;
    if (piece >= pieces) continue;
    Piece<D> out = dxr[piece];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const float xhat = (load(xv[p].e[e]) - m) * s;
      out.e[e] = store_as<D>(load(out.e[e]) + s * (load(dv[p].e[e]) * w[piece * kPer + e] - g_mean - xhat * gx_mean));
    }
    dxr[piece] = out;
  }
}

// Launches the 16-byte-piece kernel when the rows allow it (kPieces up to 6 a lane: C up to 1536 in 16 bits, 768
// in f32); false otherwise.
template <typename D>
bool launch_dx_in_pieces(D* dx, const D* dout, const D* x, const float* w, const float* mean, const float* rstd,
                         int64_t N, int64_t C, cudaStream_t stream) {
  // A row's pieces; with C a whole number of pieces and aligned starts, every row starts aligned too.
  const int64_t pieces = pieces_of<D>(C, dx, dout, x);
  if (pieces == 0) return false;
  const int64_t per_lane = ceil_div(pieces, int64_t{kWarpSize});
  const lab::cuda::LaunchConfig config{grid_for(N, kRowsPerBlock), kBlockSize, 0, stream};
  const int n = static_cast<int>(pieces);
  switch (per_lane) {
    case 1: LAB_LAUNCH((layernorm_backward_dx_pieces_kernel<D, 1>), config, dx, dout, x, w, mean, rstd, N, n); break;
    case 2: LAB_LAUNCH((layernorm_backward_dx_pieces_kernel<D, 2>), config, dx, dout, x, w, mean, rstd, N, n); break;
    case 3: LAB_LAUNCH((layernorm_backward_dx_pieces_kernel<D, 3>), config, dx, dout, x, w, mean, rstd, N, n); break;
    case 4: LAB_LAUNCH((layernorm_backward_dx_pieces_kernel<D, 4>), config, dx, dout, x, w, mean, rstd, N, n); break;
    case 6: LAB_LAUNCH((layernorm_backward_dx_pieces_kernel<D, 6>), config, dx, dout, x, w, mean, rstd, N, n); break;
    default: return false;
  }
  return true;
}

// The summands of dw[c] += sum_n dout[n, c] * xhat[n, c] and db[c] += sum_n dout[n, c], in f32 whatever D is.
template <typename D>
struct WeightAndBiasTerms {
  const D* dout;
  const D* x;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void add(int64_t n, int64_t c, float (&part)[2]) const {
    const float d = load(dout[n * C + c]);
    part[0] += d * (load(x[n * C + c]) - mean[n]) * rstd[n];
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
  dispatch_float_dtype(x.dtype(), "layernorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    LAB_LAUNCH(layernorm_forward_kernel<D>, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
               device_data<T>(out), mean.data<float>(), rstd.data<float>(), device_data<T>(x), w.data<float>(),
               b.data<float>(), N, C);
  });
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  dispatch_float_dtype(x.dtype(), "layernorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    if (!launch_dx_in_pieces(device_data<T>(dx), device_data<T>(dout), device_data<T>(x), w.data<float>(),
                             mean.data<float>(), rstd.data<float>(), N, C, scope.stream()))
      LAB_LAUNCH(layernorm_backward_dx_kernel<D>, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
                 device_data<T>(dx), device_data<T>(dout), device_data<T>(x), w.data<float>(), mean.data<float>(),
                 rstd.data<float>(), N, C);
    add_column_sums<2>(
        {{dw.data<float>(), db.data<float>()}},
        WeightAndBiasTerms<D>{device_data<T>(dout), device_data<T>(x), mean.data<float>(), rstd.data<float>(), C}, N, C,
        x.device(), scope.stream());
  });
}

}  // namespace lab::ops::cuda
