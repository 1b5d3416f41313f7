// The LayerNorm backward of one row held in registers, with dweight and dbias summed on the way: the shared
// part of LayerNorm v3's backward and of the fused residual + LayerNorm backward (v4).
//
// The input gradient of a row needs two sums over that row (below); dweight and dbias need sums over all N
// rows of each column. The core (common/ops/cuda/layernorm.cu) reads dout and x twice for that: once in the
// dx kernel, and once more in the column-sum kernels. Here the column sums ride along with dx, as llm.c's
// backward does, and the second read disappears:
//   1. one kernel, grid of weight_grad_split(N).blocks blocks: each warp takes rows of its block's chunk in
//      turn and computes their dx; each lane always holds the same columns (row_in_registers.cuh), so it adds
//      its columns' dweight and dbias terms into registers, row after row. At the end the block's warps add
//      their registers into shared memory one warp after another, and the block writes one partial sum per
//      column: partials[0][block][c] (dweight) and partials[1][block][c] (dbias).
//   2. a small kernel adds the blocks' partial sums in a fixed tree (ch06_single_gpu/chunk_totals.cuh).
// Every addition happens in an order fixed by N and C alone (never by the GPU, the scheduling or atomics):
// the results are the same bits on every run and every GPU.
//
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * weight,  xhat = (x - mean) * rstd
//   dweight += sum over rows of dout * xhat,  dbias += sum over rows of dout
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ch06_single_gpu/kernels/02_layernorm/row_in_registers.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ch06::cuda {

inline constexpr int kGradWarps = 8;  // warps per block of the backward kernels
inline constexpr int kGradThreads = kGradWarps * kWarpSize;
// Two blocks per SM of an H100 (132 SMs): one wave that fills the GPU when two blocks fit on an SM. A
// constant, not the GPU's SM count, so that the order of the additions does not depend on the GPU.
inline constexpr int64_t kWeightGradBlocks = 264;

// How the backward kernel splits N > 0 rows among its blocks: consecutive chunks of rows_per_block rows (the
// last may be shorter, none is empty), at least kGradWarps rows each so that no warp idles.
struct WeightGradSplit {
  int64_t blocks;
  int64_t rows_per_block;
};

inline WeightGradSplit weight_grad_split(int64_t N) {
  const int64_t rows_per_block =
      std::max<int64_t>(kGradWarps, ops::cuda::ceil_div(N, std::min<int64_t>(kWeightGradBlocks, N)));
  return {ops::cuda::ceil_div(N, rows_per_block), rows_per_block};
}

// ---------------------------------------------------------------- device parts

// The input gradient of one row, into `dout`'s registers (which held dout[row, :]); `x` holds x[row, :] and
// becomes xhat. Adds the row's dweight and dbias terms to this lane's running sums.
template <int kChunks>
__device__ void row_input_gradient(RegisterRow<kChunks>& dout, RegisterRow<kChunks>& x, const float* weight, float mean,
                                   float rstd, int64_t C, int lane, RegisterRow<kChunks>& dweight_sum,
                                   RegisterRow<kChunks>& dbias_sum) {
  float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = RegisterRow<kChunks>::column(i, lane);
    if (c >= C) continue;
    const float4 w = *reinterpret_cast<const float4*>(weight + c);
    const float wv[kVec] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      x.v[i][j] = (x.v[i][j] - mean) * rstd;
      const float g = dout.v[i][j] * wv[j];
      g_sum += g;
      gx_sum += g * x.v[i][j];
    }
  }
  const float g_mean = ops::cuda::warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = ops::cuda::warp_sum(gx_sum) / static_cast<float>(C);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = RegisterRow<kChunks>::column(i, lane);
    if (c >= C) continue;  // the sums of padding columns stay zero
    const float4 w = *reinterpret_cast<const float4*>(weight + c);
    const float wv[kVec] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float d = dout.v[i][j], xhat = x.v[i][j];
      dweight_sum.v[i][j] += d * xhat;
      dbias_sum.v[i][j] += d;
      dout.v[i][j] = rstd * (d * wv[j] - g_mean - xhat * gx_mean);
    }
  }
}

// The end of the backward kernel: adds the running sums of the block's warps, warp 0 first, into shared
// memory (`shared`: 2 C floats, the launch's dynamic shared memory) and writes the block's partial sums.
// Every thread of the block must call it.
template <int kChunks>
__device__ void write_block_partials(float* partials, const RegisterRow<kChunks>& dweight_sum,
                                     const RegisterRow<kChunks>& dbias_sum, float* shared, int64_t C) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int k = 0; k < kGradWarps; ++k) {
    if (warp == k) {
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        const int64_t c = RegisterRow<kChunks>::column(i, lane);
        if (c >= C) continue;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          shared[c + j] = (k == 0 ? 0.0f : shared[c + j]) + dweight_sum.v[i][j];
          shared[C + c + j] = (k == 0 ? 0.0f : shared[C + c + j]) + dbias_sum.v[i][j];
        }
      }
    }
    __syncthreads();  // warp k + 1 adds onto what warp k left
  }
  const int64_t blocks = gridDim.x;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    partials[static_cast<int64_t>(blockIdx.x) * C + c] = shared[c];
    partials[(blocks + blockIdx.x) * C + c] = shared[C + c];
  }
}

}  // namespace lab::ch06::cuda
