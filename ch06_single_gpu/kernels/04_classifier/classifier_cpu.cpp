// The classifier lab's CPU versions that materialise the probabilities (see classifier_versions.h): a softmax
// over each row into `probs`, then the cross-entropy and the backward as two more loops that read them back.
//
//   three-pass   per row: the maximum, then exp(x - max) written to probs while summing, then probs scaled by
//                1 / sum (the textbook softmax, llm.c's softmax_forward_cpu)
//   online       per row: the maximum and the sum in one pass (cpu_rows.h), then probs = exp(x - max) / sum
//
// Both then compute losses[n] = -log(probs[n, target]) and, when dloss != 0, overwrite the logits with
// dloss * (probs - onehot). Next to the fused op these move the probabilities through memory twice (written
// by the softmax, read by the backward): 8 more bytes per logit.
#include <cmath>

#include "ch06_single_gpu/kernels/04_classifier/classifier_versions.h"
#include "ch06_single_gpu/kernels/04_classifier/cpu_rows.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ch06::classifier {

namespace {

using ops::cpu::exp_fast;

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

}  // namespace lab::ch06::classifier
