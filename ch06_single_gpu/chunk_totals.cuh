// The second kernel of a deterministic column sum: adding the partial sums that the chunks of rows left, in a
// fixed order. Used by the fused backward kernels of chapter 6 (LayerNorm's dweight and dbias, the bias of
// bias + GELU), whose first kernel writes one partial sum per chunk of rows and column:
//
//   partials[k][chunk][c]   for kSums sums k, chunks of rows, columns c < C
//   out.sums[k][c] += sum over chunks of partials[k][chunk][c], the chunks added in a fixed tree
//
// A thread per column, as common/ops/cuda/column_sums.cuh's totals kernel has, walks every chunk's partial sum
// alone: a chain of a few hundred loads whose latency then dominates, on the handful of SMs that C columns
// occupy (768 columns: 3 blocks). Here kTotalRows threads share each column: thread (x, y) of a block of
// (32, kTotalRows) adds the chunks y, y + kTotalRows, ... of column 32 blockIdx.x + x, and column_sum adds the
// thread rows in a tree. The order depends only on the number of chunks, so the bits do not change from run to
// run or GPU to GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/launch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ch06::cuda {

inline constexpr int kTotalRows = 16;  // threads that share one column

// The kSums outputs, each of C floats, that the totals are added into (or written over with add false: a training
// step's first contribution to a parameter's gradient, ops::GradWrite::Overwrite).
template <int kSums>
struct ChunkTotalsOutputs {
  float* sums[kSums];
  bool add = true;
};

template <int kSums>
__global__ void __launch_bounds__(ops::cuda::kWarpSize* kTotalRows)
    chunk_totals_kernel(ChunkTotalsOutputs<kSums> out, const float* partials, int64_t chunks, int64_t C) {
  __shared__ float scratch[kTotalRows][ops::cuda::kWarpSize];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * ops::cuda::kWarpSize + threadIdx.x;
  for (int k = 0; k < kSums; ++k) {
    float sum = 0.0f;
    if (c < C) {  // no early return: every thread takes part in column_sum
      for (int64_t j = threadIdx.y; j < chunks; j += kTotalRows) sum += partials[(k * chunks + j) * C + c];
    }
    sum = ops::cuda::column_sum<kTotalRows>(sum, scratch);
    if (threadIdx.y == 0 && c < C) out.sums[k][c] = out.add ? out.sums[k][c] + sum : sum;
  }
}

// Queues the totals of `chunks` chunks' partial sums over C > 0 columns on `stream`.
template <int kSums>
void add_chunk_totals(ChunkTotalsOutputs<kSums> out, const float* partials, int64_t chunks, int64_t C,
                      cudaStream_t stream) {
  LAB_LAUNCH((chunk_totals_kernel<kSums>),
             {ops::cuda::grid_for(C, ops::cuda::kWarpSize), dim3(ops::cuda::kWarpSize, kTotalRows), 0, stream}, out,
             partials, chunks, C);
}

}  // namespace lab::ch06::cuda
