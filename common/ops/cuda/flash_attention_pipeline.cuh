// Tiles in flight: the cp.async copies that the register flash kernels (common/ops/cuda/flash_attention.cu, v7 of
// chapter 9's attention lab, and the lab's v9) queue for the next tile while they multiply the current one, and the
// two buffers a streamed tile takes in shared memory.
#pragma once

#include <cuda_pipeline_primitives.h>

#include <cstdint>

#include "common/ops/cuda/flash_attention_tiles.cuh"

namespace lab::ops::cuda::flash {

// Queues the copies of rows [first_row, first_row + 64) of one head into a [64, D] tile of shared memory, 16 bytes
// a copy (cp.async: the data goes from global to shared memory without passing through registers, and the
// thread goes on at once); rows past T are zero-filled. Heads that do not fill the tile's width, or do not sit
// 16-byte aligned, are loaded at once, element by element, instead (load_tile). All threads; the caller commits
// the batch and waits for it before a barrier that precedes the tile's first reader.
template <int D, typename E>
__device__ void issue_tile(E* tile, const E* head, int first_row, const Dims& s, int64_t ld) {
  constexpr int kPerRow = D * static_cast<int>(sizeof(E)) / 16;  // 16-byte pieces of a row
  constexpr int kRowsPerPass = kThreads / kPerRow;
  const bool aligned = reinterpret_cast<uintptr_t>(head) % 16 == 0 && ld % 8 == 0;
  if (s.hs != D || !aligned) return load_tile<D>(tile, head, first_row, s, ld);
  // Thread i copies piece i % kPerRow of rows i / kPerRow, + kRowsPerPass, + 2 kRowsPerPass, ...
  const int r0 = static_cast<int>(threadIdx.x) / kPerRow, c = static_cast<int>(threadIdx.x) % kPerRow * 8;
  E* dst = tile + r0 * kLdTile<D> + c;
  const E* src = head + static_cast<int64_t>(first_row + r0) * ld + c;
  const int rows_left = s.T - first_row - r0;
#pragma unroll
  for (int r = 0; r < kTile; r += kRowsPerPass) {
    const bool inside = r < rows_left;
    __pipeline_memcpy_async(dst + r * kLdTile<D>, inside ? src + r * ld : head, 16, inside ? 0 : 16);
  }
}

// Two buffers of a streamed tile, one after the other in shared memory: the one being multiplied and the one
// being filled. (A base pointer and an offset, not an array of two pointers: indexed by a loop counter, such an
// array would live in local memory.)
template <typename E, int D>
struct TilePair {
  E* first;
  __device__ E* operator[](int tile_index) const { return first + (tile_index % 2) * (kTile * kLdTile<D>); }
};
template <typename E, int D>
__device__ TilePair<E, D> take_pair(SharedPieces& pieces) {
  static_assert(piece_bytes<E>(kTile * kLdTile<D>) == kTile * kLdTile<D> * sizeof(E), "buffers back to back");
  return {pieces.take<E>(2 * kTile * kLdTile<D>)};
}

// Waits for this thread's copies of the tile about to be multiplied: with the next tile's batch queued after it,
// all but that latest batch; at the last tile, all. A barrier must follow (other threads' copies).
__device__ inline void wait_for_current_tile(bool next_queued) {
  if (next_queued)
    __pipeline_wait_prior(1);
  else
    __pipeline_wait_prior(0);
}

// Queues the copies of a query tile's 64 lse and 64 D rows (zeros past T) into rows[0, 64) and rows[64, 128):
// thread i copies lse row i, thread 64 + i D row i, 4 bytes each.
__device__ inline void issue_query_rows(float* rows, const float* lse, const float* D_rows, int bh, int t0,
                                        const Dims& s) {
  static_assert(kThreads == 2 * kTile, "one thread per lse row and one per D row");
  const int i = static_cast<int>(threadIdx.x) % kTile, t = t0 + i;
  const float* src = (threadIdx.x < kTile ? lse : D_rows) + static_cast<int64_t>(bh) * s.T;
  __pipeline_memcpy_async(rows + threadIdx.x, t < s.T ? src + t : src, 4, t < s.T ? 0 : 4);
}

// Queues the copies of query tile qt of one head for the kernels that stream query tiles past their keys (dK/dV):
// its Q and dO rows into buffers q[qt] and dO[qt], its lse and D rows into buffer qt % 2 of `rows` (two of 128
// floats). All threads; the caller commits the batch.
template <int D, typename E>
__device__ void issue_query_tile(const TilePair<E, D>& q, const TilePair<E, D>& dO, float* rows, const E* q_head,
                                 const E* dout_head, const float* lse, const float* D_rows, int bh, int qt,
                                 const Dims& s, int64_t ld) {
  const int t0 = qt * kTile;
  issue_tile<D>(q[qt], q_head, t0, s, ld);
  issue_tile<D>(dO[qt], dout_head, t0, s, s.C);
  issue_query_rows(rows + (qt % 2) * 2 * kTile, lse, D_rows, bh, t0, s);
}

}  // namespace lab::ops::cuda::flash
