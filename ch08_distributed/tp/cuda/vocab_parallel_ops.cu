// CUDA kernels of ch08_distributed/tp/vocab_parallel_ops.h.
//
// Embedding: forward one thread per output element (coalesced rows, as the core's embedding); backward one
// thread per (t, c) walking the batch and adding each in-slice token's gradient into its row of the slice
// with atomicAdd (repeated tokens add into the same row).
// Cross-entropy: one block per row for each pass, the threads striding over the row's real columns with
// block reductions (common/ops/cuda/reductions.cuh), as the core's fused classifier does in one kernel.
// Bias: forward one thread per element; the gradient is a column sum without atomics
// (common/ops/cuda/column_sums.cuh), in a fixed order.
//
// Token ids and targets are not validated (that would cost a host synchronisation per call): a token outside
// the table gives a NaN row, a target outside [0, vocab) a NaN loss and gradient row; nothing out of bounds
// is read or written. The CPU backend rejects both.
#include <math_constants.h>

#include "ch08_distributed/tp/vocab_parallel_ops.h"
#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"

namespace lab::ch08::tp::cuda {

namespace {

using ops::cuda::block_max;
using ops::cuda::block_sum;
using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::kWarpSize;
using ops::cuda::LaunchScope;

constexpr int kRowThreads = 512;

// This slice's real columns: [0, real) of its S columns.
__device__ int64_t real_columns(int64_t S, int64_t vocab_start, int64_t vocab) {
  const int64_t real = vocab - vocab_start;
  return real < 0 ? 0 : (real > S ? S : real);
}

// ---------------------------------------------------------------- embedding

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens, const float* wte_slice, int64_t BT,
                                         int64_t S, int64_t C, int64_t vocab_start, int64_t vocab_rows) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= BT * C) return;
  const int64_t bt = i / C, c = i % C;
  const int64_t token = tokens[bt];
  const int64_t row = token - vocab_start;
  float value = 0.0f;
  if (token < 0 || token >= vocab_rows)
    value = CUDART_NAN_F;
  else if (row >= 0 && row < S)
    value = wte_slice[row * C + c];
  out[i] = value;
}

// ---------------------------------------------------------------- cross-entropy

__global__ void max_and_target_kernel(const float* logits, const int32_t* targets, int64_t S, int64_t vocab_start,
                                      int64_t vocab, float* row_max, float* target_logit) {
  __shared__ float scratch[kWarpSize];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * S;
  const int64_t real = real_columns(S, vocab_start, vocab);
  float mx = -CUDART_INF_F;
  for (int64_t v = threadIdx.x; v < real; v += blockDim.x) mx = fmaxf(mx, row[v]);
  mx = block_max(mx, scratch);
  if (threadIdx.x != 0) return;
  const int64_t target = targets[blockIdx.x];
  const int64_t t = target - vocab_start;
  row_max[blockIdx.x] = mx;
  if (target < 0 || target >= vocab)
    target_logit[blockIdx.x] = CUDART_NAN_F;
  else
    target_logit[blockIdx.x] = t >= 0 && t < real ? row[t] : 0.0f;
}

__global__ void sum_exp_kernel(const float* logits, const float* row_max, int64_t S, int64_t vocab_start, int64_t vocab,
                               float* sum_exp) {
  __shared__ float scratch[kWarpSize];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * S;
  const int64_t real = real_columns(S, vocab_start, vocab);
  const float mx = row_max[blockIdx.x];
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < real; v += blockDim.x) sum += expf(row[v] - mx);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) sum_exp[blockIdx.x] = sum;
}

__global__ void loss_and_grad_kernel(float* logits, float* losses, const int32_t* targets, const float* row_max,
                                     const float* sum_exp, const float* target_logit, int64_t S, int64_t vocab_start,
                                     int64_t vocab, float dloss, const float* dloss_factor) {
  const int64_t n = blockIdx.x;
  const float mx = row_max[n], sum = sum_exp[n];
  const int64_t target = targets[n];
  const bool valid = target >= 0 && target < vocab;
  if (threadIdx.x == 0) losses[n] = valid ? logf(sum) + mx - target_logit[n] : CUDART_NAN_F;
  if (dloss == 0.0f) return;
  if (dloss_factor) dloss *= *dloss_factor;  // a scale the training step keeps on the device (ops::GradScale)
  float* row = logits + n * S;
  const int64_t real = real_columns(S, vocab_start, vocab);
  const int64_t t = target - vocab_start;
  const float scale = dloss / sum;
  for (int64_t v = threadIdx.x; v < S; v += blockDim.x) {
    float grad = 0.0f;
    if (v < real) grad = valid ? expf(row[v] - mx) * scale - (v == t ? dloss : 0.0f) : CUDART_NAN_F;
    row[v] = grad;
  }
}

// ---------------------------------------------------------------- bias

__global__ void add_bias_kernel(float* x, const float* bias, int64_t total, int64_t K) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] += bias[i % K];
}

// The summands of dbias[k] += sum_n dout[n, k].
struct BiasTerms {
  const float* dout;
  int64_t K;
  __device__ void add(int64_t n, int64_t k, float (&part)[1]) const { part[0] += dout[n * K + k]; }
};

}  // namespace

// ---------------------------------------------------------------- launchers

void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows) {
  const int64_t BT = tokens.numel(), S = wte_slice.dim(0), C = wte_slice.dim(1);
  if (BT * C == 0) return;
  LaunchScope scope(out);
  LAB_LAUNCH(embedding_forward_kernel, {grid_for(BT * C, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
             tokens.data<int32_t>(), wte_slice.data<float>(), BT, S, C, vocab_start, vocab_rows);
}

void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit) {
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits_slice);
  LAB_LAUNCH(max_and_target_kernel, {grid_for(N, 1), kRowThreads, 0, scope.stream()}, logits_slice.data<float>(),
             targets.data<int32_t>(), S, vocab_start, vocab, row_max.data<float>(), target_logit.data<float>());
}

void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp) {
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits_slice);
  LAB_LAUNCH(sum_exp_kernel, {grid_for(N, 1), kRowThreads, 0, scope.stream()}, logits_slice.data<float>(),
             row_max.data<float>(), S, vocab_start, vocab, sum_exp.data<float>());
}

void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss) {
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  if (N == 0) return;
  LaunchScope scope(logits_slice);
  LAB_LAUNCH(loss_and_grad_kernel, {grid_for(N, 1), kRowThreads, 0, scope.stream()}, logits_slice.data<float>(),
             losses.data<float>(), targets.data<int32_t>(), row_max.data<float>(), sum_exp.data<float>(),
             target_logit.data<float>(), S, vocab_start, vocab, dloss.value, dloss.device_pointer());
}

void add_bias(const Tensor& x, const Tensor& bias) {
  const int64_t total = x.numel(), K = bias.numel();
  if (total == 0) return;
  LaunchScope scope(x);
  LAB_LAUNCH(add_bias_kernel, {grid_for(total, kBlockSize), kBlockSize, 0, scope.stream()}, x.data<float>(),
             bias.data<float>(), total, K);
}

void add_bias_grad(const Tensor& dbias, const Tensor& dout) {
  const int64_t K = dbias.numel(), N = dout.numel() / K;
  if (N == 0) return;
  LaunchScope scope(dout);
  ops::cuda::add_column_sums<1>({{dbias.data<float>()}}, BiasTerms{dout.data<float>(), K}, N, K, dout.device(),
                                scope.stream());
}

}  // namespace lab::ch08::tp::cuda
