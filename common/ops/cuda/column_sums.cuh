// Column sums over the rows of an [N, C] matrix, for the gradients of biases and LayerNorm weights:
// out_k[c] += sum_n term_k(n, c) for kSums terms at once (LayerNorm sums two: dweight and dbias).
//
// Two kernels, split as column_split.h describes, with no atomics and a fixed order of additions:
//   1. partial sums: block (x, y) of 32 x kColumnRows threads takes columns [32x, 32x + 32) and the rows of
//      chunk y. Thread (i, j) adds every kColumnRows-th row of the chunk, starting at row j, into registers
//      (coalesced: the 32 lanes read 32 consecutive columns of a row); the block then adds its kColumnRows
//      thread rows in shared memory (column_sum) and writes one partial sum per column.
//   2. totals: one thread per column adds the chunks' partial sums in chunk order into out_k[c].
// The partial sums live in a workspace tensor allocated on the current stream, which the two kernels use in
// order before anything else queued there can reuse it.
//
// A Terms type supplies the summands: a struct of device pointers with
//   __device__ void add(int64_t n, int64_t c, float (&part)[kSums]) const   // part[k] += term_k(n, c)
#pragma once

#include <cstdint>

#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/ops/cuda/column_split.h"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ops::cuda {

// The kSums outputs, each of C floats, that the totals are added into.
template <int kSums>
struct ColumnOutputs {
  float* sums[kSums];
};

// ---------------------------------------------------------------- kernels

template <int kSums, typename Terms>
__global__ void column_partial_sums_kernel(float* partials, Terms terms, int64_t N, int64_t C, int64_t rows_per_chunk) {
  __shared__ float scratch[kColumnRows][kWarpSize];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float part[kSums] = {};
  if (c < C) {  // no early return: every thread takes part in the column sums below
    for (int64_t n = begin + threadIdx.y; n < end; n += kColumnRows) terms.add(n, c, part);
  }
  for (int k = 0; k < kSums; ++k) {
    const float total = column_sum<kColumnRows>(part[k], scratch);
    if (threadIdx.y == 0 && c < C) partials[(static_cast<int64_t>(k) * gridDim.y + blockIdx.y) * C + c] = total;
  }
}

template <int kSums>
__global__ void column_totals_kernel(ColumnOutputs<kSums> out, const float* partials, int64_t chunks, int64_t C) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int k = 0; k < kSums; ++k) {
    float total = 0.0f;
    for (int64_t j = 0; j < chunks; ++j) total += partials[(k * chunks + j) * C + c];
    out.sums[k][c] += total;
  }
}

// ---------------------------------------------------------------- launcher

// Adds the column sums of `terms` over N > 0 rows and C > 0 columns into `out`, on `stream` of `device`
// (which must be current, as inside a LaunchScope).
template <int kSums, typename Terms>
void add_column_sums(ColumnOutputs<kSums> out, const Terms& terms, int64_t N, int64_t C, Device device,
                     cudaStream_t stream) {
  const ColumnSplit split = column_split(N, C);
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({kSums, split.row_chunks, C}, DType::F32, device);
  const dim3 grid(static_cast<unsigned int>(split.column_blocks), static_cast<unsigned int>(split.row_chunks));
  LAB_LAUNCH((column_partial_sums_kernel<kSums, Terms>), {grid, dim3(kColumnWidth, kColumnRows), 0, stream},
             partials.data<float>(), terms, N, C, split.rows_per_chunk);
  LAB_LAUNCH((column_totals_kernel<kSums>), {grid_for(C, kBlockSize), kBlockSize, 0, stream}, out,
             partials.data<float>(), split.row_chunks, C);
}

}  // namespace lab::ops::cuda
