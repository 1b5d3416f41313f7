// CPU path of ch06_single_gpu/fused_classifier.h: per row, the maximum and the sum of exponentials in one
// online pass over L1-sized chunks (cpu_rows.h), the loss, then the gradient written over the logits. The row
// is read twice, against three times for the core's reference (ops::cpu::fused_classifier); both keep the
// probabilities out of memory.
#include <cmath>

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/kernels/04_classifier/cpu_rows.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ch06::cpu {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  classifier::check_targets(targets, vocab);
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const int32_t* tgt = targets.data<int32_t>();
  float* lp = logits.data<float>();
  float* loss = losses.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = lp + n * Vp;
    const classifier::MaxSum s = classifier::online_max_sum(row, vocab);
    const int64_t t = tgt[n];
    loss[n] = std::log(s.sum) + s.max - row[t];
    if (dloss == 0.0f) continue;
    const float mx = s.max, scale = dloss / s.sum;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) row[v] = ops::cpu::exp_fast(row[v] - mx) * scale;
    row[t] -= dloss;
    for (int64_t v = vocab; v < Vp; ++v) row[v] = 0.0f;
  }
}

}  // namespace lab::ch06::cpu
