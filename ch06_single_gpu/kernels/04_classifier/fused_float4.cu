// The classifier lab's v4: the fused classifier with the online pass and float4 loads and stores (f32 logits).
//
// One block per row of logits, two passes over the row:
//   1. the online softmax (online_softmax.cuh): each thread gathers the maximum and the sum of exp(x - max) of
//      its elements at once, then one block reduction combines the threads' pairs;
//   2. the gradient dloss * (exp(x - max) / sum - onehot) written over the logits, zeros over the padding.
// The core's kernel (common/ops/cuda/classifier.cu, v3) makes three passes, a block reduction after each of the
// first two; this one reads each row once less (4 of its 12 bytes per logit), with half the reductions.
//
// The passes load and store float4 (kVec = 4) when every row starts 16-byte aligned (Vp a multiple of 4 and
// an aligned base): a quarter of the memory instructions for the same bytes. Other layouts take the scalar
// instance (kVec = 1) of the same kernel. A vector may straddle the end of the real vocabulary: its elements
// past `vocab` are left out of the maximum and the sum and written as zero. v5 (with v6 the promoted op,
// fused_classifier.cu) keeps each thread's part of the row on chip between the passes and reads the
// logits in their own dtype.
//
// Targets are not checked here (that would cost a host synchronisation per call): a target outside
// [0, vocab) gives a NaN loss and a NaN gradient row; nothing is read or written out of bounds.
#include <math_constants.h>

#include <cstdint>

#include "ch06_single_gpu/kernels/04_classifier/classifier_versions.h"
#include "ch06_single_gpu/kernels/04_classifier/online_softmax.cuh"
#include "ch06_single_gpu/vector_access.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::classifier {

namespace {

using cuda::add_to_max_sum;
using cuda::block_reduce_max_sum;
using cuda::empty_max_sum;
using cuda::load_vector;
using cuda::MaxSum;
using cuda::store_vector;
using ops::cuda::grid_for;
using ops::cuda::kWarpSize;
using ops::cuda::LaunchScope;

// Threads per row: 16 warps stride over the row; with 50304 / 4 = 12576 vectors a row, each thread makes
// about 25 loads per pass.
constexpr int kThreads = 512;

// ---------------------------------------------------------------- kernel

template <int kVec>
__global__ void fused_float4_kernel(float* logits, float* losses, const int32_t* targets, int64_t Vp, int64_t vocab,
                                    float dloss) {
  __shared__ MaxSum scratch[kWarpSize];
  float* row = logits + static_cast<int64_t>(blockIdx.x) * Vp;
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;
  // Every thread reads it (one broadcast load), before any thread overwrites the row: the block reduction
  // below is a barrier between the two.
  const float target_logit = valid ? row[target] : 0.0f;

  MaxSum s = empty_max_sum();
  const int64_t real_vectors = (vocab + kVec - 1) / kVec;
  for (int64_t i = threadIdx.x; i < real_vectors; i += blockDim.x) {
    float x[kVec];
    load_vector(row + i * kVec, x);
    add_to_max_sum<kVec>(s, x, vocab - i * kVec);
  }
  s = block_reduce_max_sum(s, scratch);

  if (threadIdx.x == 0) losses[blockIdx.x] = valid ? logf(s.sum) + s.max - target_logit : CUDART_NAN_F;
  if (dloss == 0.0f) return;
  const float scale = dloss / s.sum;
  for (int64_t i = threadIdx.x; i < Vp / kVec; i += blockDim.x) {
    float x[kVec];
    load_vector(row + i * kVec, x);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int64_t v = i * kVec + j;
      float grad = 0.0f;
      if (v < vocab) grad = valid ? expf(x[j] - s.max) * scale - (v == target ? dloss : 0.0f) : CUDART_NAN_F;
      x[j] = grad;
    }
    store_vector(row + i * kVec, x);
  }
}

}  // namespace

// ---------------------------------------------------------------- launcher

void gpu_fused_float4(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits);
  const ::lab::cuda::LaunchConfig rows{grid_for(N, 1), kThreads, 0, scope.stream()};
  const bool aligned_rows = Vp % 4 == 0 && reinterpret_cast<uintptr_t>(logits.raw()) % 16 == 0;
  if (aligned_rows)
    LAB_LAUNCH((fused_float4_kernel<4>), rows, logits.data<float>(), losses.data<float>(), targets.data<int32_t>(), Vp,
               vocab, dloss);
  else
    LAB_LAUNCH((fused_float4_kernel<1>), rows, logits.data<float>(), losses.data<float>(), targets.data<int32_t>(), Vp,
               vocab, dloss);
}

}  // namespace lab::ch06::classifier
