// CUDA kernel of common/ops/classifier.h: softmax, cross-entropy and its gradient in one pass per row, for f32,
// bf16 and f16 logits with fp32 arithmetic (dtype_dispatch.cuh: each logit widened as it is loaded, each gradient
// element rounded once as it is stored; the losses are f32).
//
// Parallelisation: one block of kThreads threads per row of logits. The threads stride over the row
// (coalesced) three times: the maximum, the sum of exponentials (block reductions through shared
// memory), then the loss and, when dloss != 0, the gradient (dloss times a device scale when one is given) written
// over the logits, with zeros in the padded columns [vocab, Vp). A row of GPT-2 logits is 200 KB, so the second and
// third passes mostly hit L2; recomputing exp is cheaper than storing probabilities.
//
// Targets are not validated here (that would cost a host synchronisation per call): a target outside
// [0, vocab) gives a NaN loss and a NaN gradient row, so the loss shows it at once; nothing is read or
// written out of bounds. The CPU backend rejects such targets.
#include <math_constants.h>

#include "common/ops/classifier.h"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/dispatch.h"

namespace lab::ops::cuda {

namespace {

constexpr int kThreads = 512;

// ---------------------------------------------------------------- kernel

template <typename D>
__global__ void fused_classifier_kernel(D* logits, float* losses, const int32_t* targets, int64_t Vp, int64_t vocab,
                                        float dloss, const float* dloss_factor) {
  __shared__ float scratch[kWarpSize];
  D* row = logits + static_cast<int64_t>(blockIdx.x) * Vp;
  const int64_t target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;
  // Read before any thread overwrites the row: the block reductions below are barriers between the two.
  const float target_logit = valid ? load(row[target]) : 0.0f;

  float mx = -CUDART_INF_F;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) mx = fmaxf(mx, load(row[v]));
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) sum += expf(load(row[v]) - mx);
  sum = block_sum(sum, scratch);

  if (threadIdx.x == 0) losses[blockIdx.x] = valid ? logf(sum) + mx - target_logit : CUDART_NAN_F;
  if (dloss == 0.0f) return;
  if (dloss_factor) dloss *= *dloss_factor;
  const float scale = dloss / sum;
  for (int64_t v = threadIdx.x; v < Vp; v += blockDim.x) {
    float grad = 0.0f;
    if (v < vocab) grad = valid ? expf(load(row[v]) - mx) * scale - (v == target ? dloss : 0.0f) : CUDART_NAN_F;
    row[v] = store_as<D>(grad);
  }
}

}  // namespace

// ---------------------------------------------------------------- launcher

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits);
  dispatch_float_dtype(logits.dtype(), "fused_classifier", [&](auto tag) {
    using S = typename decltype(tag)::type;
    LAB_LAUNCH(fused_classifier_kernel<typename DeviceType<S>::type>, {grid_for(N, 1), kThreads, 0, scope.stream()},
               device_data<S>(logits), losses.data<float>(), targets.data<int32_t>(), Vp, vocab, dloss.value,
               dloss.device_pointer());
  });
}

}  // namespace lab::ops::cuda
