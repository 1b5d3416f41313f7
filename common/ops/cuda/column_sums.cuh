// Column sums over the rows of an [N, C] matrix, for the gradients of biases and LayerNorm weights:
// out_k[c] += sum_n term_k(n, c) for kSums terms at once (LayerNorm sums two: dweight and dbias).
//
// Two kernels, split as column_split.h describes, with no atomics and a fixed order of additions:
//   1. partial sums: block (x, y) of 32 x kColumnRows threads takes columns [32x, 32x + 32) and the rows of
//      chunk y. Thread (i, j) adds every kColumnRows-th row of the chunk, starting at row j, into registers
//      (coalesced: the 32 lanes read 32 consecutive columns of a row); the block then adds its kColumnRows
//      thread rows in shared memory (column_sum) and writes one partial sum per column.
//   2. totals: block x of 32 x kColumnRows threads takes columns [32x, 32x + 32); thread (i, j) adds the partial
//      sums of chunks j, j + kColumnRows, ... of its column, and the block's thread rows meet in shared memory
//      (column_sum) before row 0 adds each total into out_k[c]. One thread per column adding every chunk in turn
//      would make C threads in a few blocks, each waiting on its loads one after another: at GPT-2's C = 768 and the
//      LayerNorm backward's 528 chunks, 768 threads in 3 blocks, 1056 loads each; here 24 blocks of 512 threads,
//      66 loads each.
// The partial sums live in a workspace tensor allocated on the current stream, which the two kernels use in
// order before anything else queued there can reuse it.
//
// A Terms type supplies the summands: a struct of device pointers with
//   __device__ void add(int64_t n, int64_t c, float (&part)[kSums]) const   // part[k] += term_k(n, c)
//
// Plain sums of a matrix (a bias gradient: out[c] += sum_n x[n, c]) whose rows split into 16-byte pieces take a
// first kernel that reads pieces (add_column_piece_sums): lane i of a block reads piece 32 * blockIdx.x + i of its
// rows, so a warp moves 512 contiguous bytes a row where the element kernel moves 32 elements (64 bytes of a 16-bit
// row) with a load instruction each; its block adds its thread rows through shared memory in one step.
#pragma once

#include <cstdint>

#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/ops/cuda/column_split.h"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ops::cuda {

// The kSums outputs, each of C floats, that the totals are added into (or, with add false, written over: an output
// that is a training step's first contribution to a parameter's gradient, ops::GradWrite::Overwrite).
template <int kSums>
struct ColumnOutputs {
  float* sums[kSums];
  bool add = true;
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

// partials is [kSums, chunks, C]; a block of kColumnWidth x kColumnRows threads per kColumnWidth columns.
template <int kSums>
__global__ void column_totals_kernel(ColumnOutputs<kSums> out, const float* partials, int64_t chunks, int64_t C) {
  __shared__ float scratch[kColumnRows][kWarpSize];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  float part[kSums] = {};
  if (c < C) {  // no early return: every thread takes part in the column sums below
    for (int64_t j = threadIdx.y; j < chunks; j += kColumnRows) {
#pragma unroll
      for (int k = 0; k < kSums; ++k) part[k] += partials[(k * chunks + j) * C + c];
    }
  }
  for (int k = 0; k < kSums; ++k) {
    const float total = column_sum<kColumnRows>(part[k], scratch);
    if (threadIdx.y == 0 && c < C) out.sums[k][c] = out.add ? out.sums[k][c] + total : total;
  }
}

// One partial sum per column and chunk of x [N, C] (C a whole number of pieces, x 16-byte aligned): thread (i, j)
// adds piece 32 * blockIdx.x + i of every kColumnRows-th row of the chunk from row j; the block's thread rows then
// meet in shared memory, element e of lane i at [j][e * 32 + i] (conflict-free stores), and thread t < 32 * kPer
// adds slot t over the rows: column (t % 32) * kPer + t / 32 of the block's.
template <typename D>
__global__ void column_piece_partial_sums_kernel(float* partials, const D* x, int64_t N, int64_t C,
                                                 int64_t rows_per_chunk) {
  constexpr int kPer = Piece<D>::kElements, kBlockColumns = kColumnWidth * kPer;
  static_assert(kBlockColumns <= kColumnWidth * kColumnRows, "one thread per column of the block");
  __shared__ float scratch[kColumnRows][kBlockColumns];
  const int64_t pieces = C / kPer, piece = static_cast<int64_t>(blockIdx.x) * kColumnWidth + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float part[kPer] = {};
  if (piece < pieces) {  // no early return: every thread meets the barrier below
    const Piece<D>* rows = reinterpret_cast<const Piece<D>*>(x);
#pragma unroll 4
    for (int64_t n = begin + threadIdx.y; n < end; n += kColumnRows) {
      const Piece<D> p = rows[n * pieces + piece];
#pragma unroll
      for (int e = 0; e < kPer; ++e) part[e] += load(p.e[e]);
    }
  }
#pragma unroll
  for (int e = 0; e < kPer; ++e) scratch[threadIdx.y][e * kColumnWidth + threadIdx.x] = part[e];
  __syncthreads();
  const int t = static_cast<int>(threadIdx.y * kColumnWidth + threadIdx.x);
  if (t < kBlockColumns) {
    float total = 0.0f;
    for (int j = 0; j < kColumnRows; ++j) total += scratch[j][t];
    const int64_t c = static_cast<int64_t>(blockIdx.x) * kBlockColumns + (t % kColumnWidth) * kPer + t / kColumnWidth;
    if (c < C) partials[static_cast<int64_t>(blockIdx.y) * C + c] = total;
  }
}

// ---------------------------------------------------------------- launchers

// Adds the totals of partials [kSums, chunks, C] (f32, on `stream`) into `out`.
template <int kSums>
void add_column_totals(ColumnOutputs<kSums> out, const float* partials, int64_t chunks, int64_t C,
                       cudaStream_t stream) {
  LAB_LAUNCH(
      column_totals_kernel<kSums>,
      {static_cast<unsigned int>(ceil_div(C, int64_t{kColumnWidth})), dim3(kColumnWidth, kColumnRows), 0, stream}, out,
      partials, chunks, C);
}

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
  add_column_totals<kSums>(out, partials.data<float>(), split.row_chunks, C, stream);
}

// Adds the column sums of x [N > 0, C > 0] into out (C floats), or writes them with add false, when x's rows split
// into 16-byte pieces, on `stream` of `device` (current, as inside a LaunchScope); returns false, with nothing queued,
// when they do not.
template <typename D>
bool add_column_piece_sums(float* out, const D* x, int64_t N, int64_t C, Device device, cudaStream_t stream,
                           bool add = true) {
  if (pieces_of<D>(C, x) == 0) return false;
  const ColumnSplit split = column_split(N, C, kColumnWidth * Piece<D>::kElements, kPieceColumnSumBlocks);
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({split.row_chunks, C}, DType::F32, device);
  const dim3 grid(static_cast<unsigned int>(split.column_blocks), static_cast<unsigned int>(split.row_chunks));
  LAB_LAUNCH(column_piece_partial_sums_kernel<D>, {grid, dim3(kColumnWidth, kColumnRows), 0, stream},
             partials.data<float>(), x, N, C, split.rows_per_chunk);
  add_column_totals<1>({{out}, add}, partials.data<float>(), split.row_chunks, C, stream);
  return true;
}

}  // namespace lab::ops::cuda
