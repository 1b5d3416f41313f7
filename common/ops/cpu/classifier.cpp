// CPU reference of common/ops/classifier.h.
//
// One row of logits (50,304 floats, ~200 KB) stays in the core's L2 cache, so the three passes over it
// (max, sum of exponentials, gradient) cost about one trip to memory; recomputing exp in the third pass is
// cheaper than storing the probabilities.
#include "common/ops/classifier.h"

#include <cmath>

#include "common/ops/cpu/vec_math.h"

namespace lab::ops::cpu {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const int32_t* tgt = targets.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    LAB_CHECK(tgt[n] >= 0 && tgt[n] < vocab, InvalidArgument, "fused_classifier: target ", tgt[n], " at row ", n,
              " is outside [0, ", vocab, ")");
  float* lp = logits.data<float>();
  float* loss = losses.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = lp + n * Vp;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < vocab; ++v) mx = row[v] > mx ? row[v] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < vocab; ++v) sum += exp_fast(row[v] - mx);
    const int64_t t = tgt[n];
    loss[n] = std::log(sum) + mx - row[t];
    if (dloss == 0.0f) continue;
    const float scale = dloss / sum;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) row[v] = exp_fast(row[v] - mx) * scale;
    row[t] -= dloss;
    for (int64_t v = vocab; v < Vp; ++v) row[v] = 0.0f;
  }
}

}  // namespace lab::ops::cpu
