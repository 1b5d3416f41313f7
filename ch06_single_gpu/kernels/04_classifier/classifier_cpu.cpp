// The classifier lab's CPU versions (see classifier_versions.h):
//
//   three-pass     per row: the maximum, then exp(x - max) written to probs while summing, then probs scaled by
//                  1 / sum (the textbook softmax, llm.c's softmax_forward_cpu); then the cross-entropy and the
//                  backward as two more loops that read the probabilities back
//   online         per row: the maximum and the sum in one pass (below), then probs = exp(x - max) / sum; the
//                  same two loops
//   fused online   per row: the online pass, the loss, then the gradient written over the logits: no
//                  probabilities, and the row read twice where the core's fused loop (ops::cpu) reads it three
//                  times
//
// The online pass on the CPU. The GPU versions update the (maximum, sum) pair element by element or vector by
// vector (online_softmax.cuh); here that would cost a branch or a second exponential per element, and neither
// vectorises. Instead the row is taken in chunks small enough to stay in L1: the chunk's maximum (one
// vectorised loop), the running sum rescaled once if the maximum grew, then the chunk's exponentials (a second
// vectorised loop, over data now in L1). Memory, or L2, sees the row once; the second look at each chunk costs
// an L1 hit. This is the blocked form flash attention uses for its tiles.
#include <algorithm>
#include <cmath>

#include "ch06_single_gpu/kernels/04_classifier/classifier_versions.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ch06::classifier {

namespace {

using ops::cpu::exp_fast;

// Error(InvalidArgument) naming the row of the first target outside [0, vocab), as ops::cpu's does.
void check_targets(const Tensor& targets, int64_t vocab) {
  const int32_t* t = targets.data<int32_t>();
  for (int64_t n = 0; n < targets.numel(); ++n)
    LAB_CHECK(t[n] >= 0 && t[n] < vocab, InvalidArgument, "fused_classifier: target ", t[n], " at row ", n,
              " is outside [0, ", vocab, ")");
}

struct MaxSum {
  float max = -INFINITY;
  float sum = 0.0f;  // of exp(x - max) over the elements seen
};

// 1024 floats (4 KiB): a chunk and its neighbours stay in any L1 data cache.
constexpr int64_t kOnlineChunk = 1024;

MaxSum online_max_sum(const float* row, int64_t n) {
  MaxSum state;
  for (int64_t begin = 0; begin < n; begin += kOnlineChunk) {
    const int64_t end = std::min(n, begin + kOnlineChunk);
    float chunk_max = -INFINITY;
#pragma omp simd reduction(max : chunk_max)
    for (int64_t v = begin; v < end; ++v) chunk_max = row[v] > chunk_max ? row[v] : chunk_max;
    if (chunk_max > state.max) {
      // exp_fast clamps its argument at -87, so the first chunk (max = -inf) scales a zero sum by ~1e-38.
      state.sum *= exp_fast(state.max - chunk_max);
      state.max = chunk_max;
    }
    const float mx = state.max;
    float chunk_sum = 0.0f;
#pragma omp simd reduction(+ : chunk_sum)
    for (int64_t v = begin; v < end; ++v) chunk_sum += exp_fast(row[v] - mx);
    state.sum += chunk_sum;
  }
  return state;
}

// losses[n] = -log(probs[n, target]); then, when dloss != 0, logits = dloss * (probs - onehot), zero padding.
void cross_entropy_and_backward(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                                float dloss, const Tensor& probs) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const float* p = probs.data<float>();
  const int32_t* tgt = targets.data<int32_t>();
  float* loss = losses.data<float>();
  for (int64_t n = 0; n < N; ++n) loss[n] = -std::log(p[n * Vp + tgt[n]]);
  if (dloss == 0.0f) return;
  float* d = logits.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* pr = p + n * Vp;
    float* dr = d + n * Vp;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) dr[v] = dloss * pr[v];
    dr[tgt[n]] -= dloss;
    for (int64_t v = vocab; v < Vp; ++v) dr[v] = 0.0f;
  }
}

}  // namespace

void cpu_three_pass(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                    const Tensor& probs) {
  check_targets(targets, vocab);
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const float* x = logits.data<float>();
  float* p = probs.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * Vp;
    float* pr = p + n * Vp;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < vocab; ++v) mx = xr[v] > mx ? xr[v] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < vocab; ++v) {
      pr[v] = exp_fast(xr[v] - mx);
      sum += pr[v];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) pr[v] *= inv;
    for (int64_t v = vocab; v < Vp; ++v) pr[v] = 0.0f;
  }
  cross_entropy_and_backward(logits, losses, targets, vocab, dloss, probs);
}

void cpu_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                const Tensor& probs) {
  check_targets(targets, vocab);
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const float* x = logits.data<float>();
  float* p = probs.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * Vp;
    float* pr = p + n * Vp;
    const MaxSum s = online_max_sum(xr, vocab);
    const float mx = s.max, inv = 1.0f / s.sum;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) pr[v] = exp_fast(xr[v] - mx) * inv;
    for (int64_t v = vocab; v < Vp; ++v) pr[v] = 0.0f;
  }
  cross_entropy_and_backward(logits, losses, targets, vocab, dloss, probs);
}

void cpu_fused_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  check_targets(targets, vocab);
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const int32_t* tgt = targets.data<int32_t>();
  float* lp = logits.data<float>();
  float* loss = losses.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = lp + n * Vp;
    const MaxSum s = online_max_sum(row, vocab);
    const int64_t t = tgt[n];
    loss[n] = std::log(s.sum) + s.max - row[t];
    if (dloss == 0.0f) continue;
    const float mx = s.max, scale = dloss / s.sum;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) row[v] = exp_fast(row[v] - mx) * scale;
    row[t] -= dloss;
    for (int64_t v = vocab; v < Vp; ++v) row[v] = 0.0f;
  }
}

}  // namespace lab::ch06::classifier
