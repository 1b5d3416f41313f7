// Softmax, cross-entropy and their backward on GPT-2's logits, version by version (rows of Vp = 50304 floats,
// the real vocabulary V = 50257 first; one row per position, N = B*T rows). Every version computes what
// common/ops/classifier.h specifies and is checked against its CPU reference.
//
//   v1  (this file) three-pass softmax, materialised: one block per row walks the row three times (the
//       maximum, the sum of exp(x - max), then probs = exp(x - max) / sum written to memory); a cross-entropy
//       kernel reads probs[n, target]; a backward kernel reads probs again and writes dloss * (probs - onehot)
//       over the logits. Three kernels, and the probabilities cross memory twice.
//   v2  (this file) online softmax, materialised: the maximum and the sum in one pass (online_softmax.cuh), so
//       the softmax kernel reads each row twice instead of three times; the same cross-entropy and backward
//       kernels follow.
//   v3  the core's fused classifier (common/ops/cuda/classifier.cu): one kernel, one block per row, three
//       passes (maximum, sum, gradient) and no probabilities in memory; the gradient pass recomputes exp.
//   v4  the promoted fused classifier (fused_classifier.cu): v3 with the online pass of v2 (the row read
//       twice) and float4 loads and stores.
//
// A row of logits is 201 KB: the passes after the first find it in L2 only while the row's block is among
// the few hundred resident at once, so the bytes each version moves lie between one read of the logits
// (perfect reuse) and one read per pass (none). The lab's table counts one per pass.
#include <math_constants.h>

#include "ch06_single_gpu/kernels/04_classifier/classifier_versions.h"
#include "ch06_single_gpu/kernels/04_classifier/online_softmax.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ch06::classifier {

namespace {

using cuda::MaxSum;
using ops::cuda::block_max;
using ops::cuda::block_sum;
using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::kWarpSize;
using ops::cuda::LaunchScope;

// Threads of a softmax block: one block per row, the threads striding over it (coalesced).
constexpr int kRowThreads = 512;

// ================================================================ v1: three-pass softmax

__global__ void softmax_three_pass_kernel(float* probs, const float* logits, int64_t Vp, int64_t vocab) {
  __shared__ float scratch[kWarpSize];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * Vp;
  float* p = probs + static_cast<int64_t>(blockIdx.x) * Vp;
  float mx = -CUDART_INF_F;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) mx = fmaxf(mx, x[v]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(x[v] - mx);
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t v = threadIdx.x; v < Vp; v += blockDim.x) p[v] = v < vocab ? expf(x[v] - mx) * inv : 0.0f;
}

// ================================================================ v2: online softmax

__global__ void softmax_online_kernel(float* probs, const float* logits, int64_t Vp, int64_t vocab) {
  __shared__ MaxSum scratch[kWarpSize];
  const float* x = logits + static_cast<int64_t>(blockIdx.x) * Vp;
  float* p = probs + static_cast<int64_t>(blockIdx.x) * Vp;
  MaxSum s = cuda::empty_max_sum();
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float element[1] = {x[v]};
    cuda::add_to_max_sum<1>(s, element, 1);
  }
  s = cuda::block_reduce_max_sum(s, scratch);
  const float inv = 1.0f / s.sum;
  for (int64_t v = threadIdx.x; v < Vp; v += blockDim.x) p[v] = v < vocab ? expf(x[v] - s.max) * inv : 0.0f;
}

// ================================================================ v1, v2: cross-entropy and backward

// One thread per row: losses[n] = -log(probs[n, target]). A target outside [0, vocab) gives NaN (not read).
__global__ void cross_entropy_kernel(float* losses, const float* probs, const int32_t* targets, int64_t N, int64_t Vp,
                                     int64_t vocab) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const int64_t t = targets[n];
  losses[n] = t >= 0 && t < vocab ? -logf(probs[n * Vp + t]) : CUDART_NAN_F;
}

// One thread per logit: dlogits = dloss * (probs - onehot) over the real columns, 0 over the padding.
__global__ void cross_entropy_backward_kernel(float* dlogits, const float* probs, const int32_t* targets, int64_t N,
                                              int64_t Vp, int64_t vocab, float dloss) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * Vp) return;
  const int64_t n = i / Vp, v = i % Vp;
  const int64_t t = targets[n];
  float grad = 0.0f;
  if (v < vocab) grad = t >= 0 && t < vocab ? dloss * (probs[i] - (v == t ? 1.0f : 0.0f)) : CUDART_NAN_F;
  dlogits[i] = grad;
}

enum class Softmax { ThreePass, Online };

// The softmax kernel into probs, then the cross-entropy, then (dloss != 0) the backward over the logits.
void materialised(Softmax softmax, const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                  float dloss, const Tensor& probs) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits);
  const ::lab::cuda::LaunchConfig rows{grid_for(N, 1), kRowThreads, 0, scope.stream()};
  if (softmax == Softmax::ThreePass)
    LAB_LAUNCH(softmax_three_pass_kernel, rows, probs.data<float>(), logits.data<float>(), Vp, vocab);
  else
    LAB_LAUNCH(softmax_online_kernel, rows, probs.data<float>(), logits.data<float>(), Vp, vocab);
  LAB_LAUNCH(cross_entropy_kernel, {grid_for(N, kBlockSize), kBlockSize, 0, scope.stream()}, losses.data<float>(),
             probs.data<float>(), targets.data<int32_t>(), N, Vp, vocab);
  if (dloss == 0.0f) return;
  LAB_LAUNCH(cross_entropy_backward_kernel, {grid_for(N * Vp, kBlockSize), kBlockSize, 0, scope.stream()},
             logits.data<float>(), probs.data<float>(), targets.data<int32_t>(), N, Vp, vocab, dloss);
}

}  // namespace

// ================================================================ launchers

void gpu_three_pass(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                    const Tensor& probs) {
  materialised(Softmax::ThreePass, logits, losses, targets, vocab, dloss, probs);
}

void gpu_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                const Tensor& probs) {
  materialised(Softmax::Online, logits, losses, targets, vocab, dloss, probs);
}

}  // namespace lab::ch06::classifier
