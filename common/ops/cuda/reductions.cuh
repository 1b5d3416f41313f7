// Device-side reductions shared by the kernels: over a warp, over a 1-D block, and over the rows of a
// (32 x kRows) block (column sums, for bias and LayerNorm weight gradients).
//
// Rules for callers: block_reduce and column_sum contain __syncthreads(), so every thread of the block
// must reach them (no early return before the call); block_reduce needs a 1-D block whose size is a
// multiple of 32. Each ends with a barrier, so its shared scratch may be reused by the next call at once.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace lab::ops::cuda {

inline constexpr unsigned int kFullMask = 0xffffffffu;
inline constexpr int kWarpSize = 32;

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
  __device__ static float identity() { return 0.0f; }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ static float identity() { return -INFINITY; }
};

// The reduction over the 32 lanes of a warp; every lane receives the result. All 32 lanes must call it.
template <typename Op>
__device__ float warp_reduce(float value, Op op) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}
__device__ inline float warp_sum(float value) {
  return warp_reduce(value, SumOp{});
}
__device__ inline float warp_max(float value) {
  return warp_reduce(value, MaxOp{});
}

// The reduction over a whole 1-D block; every thread receives the result. `scratch`: 32 floats of shared memory.
template <typename Op>
__device__ float block_reduce(float value, float* scratch, Op op) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_reduce(value, op);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  // Every warp reduces the per-warp results (only the entries written above are read).
  value = lane < warps ? scratch[lane] : Op::identity();
  value = warp_reduce(value, op);
  __syncthreads();
  return value;
}
__device__ inline float block_sum(float value, float* scratch) {
  return block_reduce(value, scratch, SumOp{});
}
__device__ inline float block_max(float value, float* scratch) {
  return block_reduce(value, scratch, MaxOp{});
}

// Column sums in a block of (32, kRows) threads: thread (x, y) holds a partial sum of column x; returns
// the sum over y to every thread. `scratch`: kRows x 32 floats of shared memory; kRows a power of two.
template <int kRows>
__device__ float column_sum(float partial, float (*scratch)[kWarpSize]) {
  static_assert((kRows & (kRows - 1)) == 0, "kRows must be a power of two");
  scratch[threadIdx.y][threadIdx.x] = partial;
  __syncthreads();
  for (int stride = kRows / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.y) < stride)
      scratch[threadIdx.y][threadIdx.x] += scratch[threadIdx.y + stride][threadIdx.x];
    __syncthreads();
  }
  const float total = scratch[0][threadIdx.x];
  __syncthreads();
  return total;
}

}  // namespace lab::ops::cuda
