// The online softmax on the GPU (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"): the
// maximum of a row and the sum of exp(x - max) in one pass over it, instead of a pass for the maximum and a
// second for the sum.
//
// Each thread keeps the pair for the elements it has seen; when a new element raises the maximum, the sum so
// far is rescaled to the new one (multiplied by exp(old max - new max)), so it always holds the sum relative
// to the current maximum. Two pairs combine the same way, which is what the warp and block reductions below do:
//   (m, s) + (m', s') = (M, s exp(m - M) + s' exp(m' - M)),  M = max(m, m')
// Elements arrive kVec at a time (one scalar or one float4 load): the vector's maximum first, one rescale if
// it raised the pair's, then the vector's exponentials; about one exponential per element, as the three-pass
// softmax's second pass has.
//
// A NaN element makes the sum NaN (and so the loss), as in the three-pass softmax; -inf elements add nothing.
// Rules for callers: block_reduce_max_sum contains __syncthreads() (every thread of the block must reach it)
// and needs a 1-D block whose size is a multiple of 32; it ends with a barrier, so `scratch` may be reused.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/ops/cuda/reductions.cuh"

namespace lab::ch06::cuda {

using ops::cuda::kFullMask;
using ops::cuda::kWarpSize;

struct MaxSum {
  float max;
  float sum;  // of exp(x - max) over the elements seen
};

__device__ inline MaxSum empty_max_sum() {
  return {-INFINITY, 0.0f};
}

// Adds the first `count` elements of x (the others lie past the real vocabulary).
template <int kVec>
__device__ void add_to_max_sum(MaxSum& s, const float (&x)[kVec], int64_t count) {
  float vector_max = -INFINITY;
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    if (j < count) vector_max = fmaxf(vector_max, x[j]);
  if (vector_max > s.max) {
    s.sum *= expf(s.max - vector_max);  // exp(-inf) = 0 for the first elements: 0 * 0
    s.max = vector_max;
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    if (j < count && x[j] != -INFINITY) s.sum += expf(x[j] - s.max);  // (-inf) - (-inf) would be NaN
}

__device__ inline MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return a;  // both empty
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

// Every lane receives the warp's pair (a butterfly of shuffles: the combination is commutative, so every lane
// computes the same bits). All 32 lanes must call it.
__device__ inline MaxSum warp_reduce_max_sum(MaxSum s) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(kFullMask, s.max, offset), __shfl_xor_sync(kFullMask, s.sum, offset)};
    s = combine(s, other);
  }
  return s;
}

// Every thread receives the block's pair. `scratch`: kWarpSize pairs of shared memory.
__device__ inline MaxSum block_reduce_max_sum(MaxSum s, MaxSum* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  s = warp_reduce_max_sum(s);
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  s = lane < warps ? scratch[lane] : empty_max_sum();
  s = warp_reduce_max_sum(s);
  __syncthreads();
  return s;
}

}  // namespace lab::ch06::cuda
