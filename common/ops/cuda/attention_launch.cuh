// What the launchers of cuda/attention.cu and cuda/batched_attention.cu share: the sizes of a call as cuBLAS takes
// them, where a batch row's q, k and v start, and the launch of their softmax kernels (one warp per row).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/core/tensor.h"
#include "common/cuda/launch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ops::cuda {

// Shapes of one call, in elements; cuBLAS takes int sizes, and the heads are the batch of each product.
struct HeadDims {
  int64_t B;  // batch rows: one round of products each
  int T, C, HS, NH;
  int ld_qkv;   // 3C, the row stride of qkv and dqkv
  int64_t TT;   // T * T, one head's scores
  float scale;  // 1 / sqrt(HS)

  // Nothing to compute: no batch rows, no positions or no channels.
  bool empty() const { return B == 0 || T == 0 || C == 0; }
};

// The sizes of qkv with n_head heads (which the public op has checked); Unsupported where one does not fit an int.
inline HeadDims head_dims(const Tensor& qkv, int n_head) {
  const int ld_qkv = as_blas_int(qkv.dim(2), "qkv width (3C)");
  const int T = as_blas_int(qkv.dim(1), "sequence length");
  const int C = ld_qkv / 3, HS = C / n_head;
  return {qkv.dim(0), T, C, HS, n_head, ld_qkv, static_cast<int64_t>(T) * T, 1.0f / std::sqrt(static_cast<float>(HS))};
}

// Head 0 of q, k and v in batch row b of qkv (or of dqkv): [T, HS] blocks with row stride 3C, head h being
// h * HS elements further on.
template <typename E>
struct QkvRow {
  E* q;
  E* k;
  E* v;
};

template <typename E>
QkvRow<E> qkv_row(E* qkv, const HeadDims& d, int64_t b) {
  E* q = qkv + b * d.T * d.ld_qkv;
  return {q, q + d.C, q + 2 * d.C};
}

// The softmax kernels run one warp per row of scores (the lanes stride over the row, coalesced, and combine with
// warp shuffles), kRowsPerBlock rows per block.
inline constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

// The launch configuration of such a kernel over `rows` rows.
inline lab::cuda::LaunchConfig one_warp_per_row(int64_t rows, cudaStream_t stream) {
  return {grid_for(rows, kRowsPerBlock), kBlockSize, 0, stream};
}

}  // namespace lab::ops::cuda
