// CPU reference of common/ops/classifier.h, for f32, bf16 and f16 logits with fp32 arithmetic.
//
// One row of logits (50,304 floats, ~200 KB) stays in the core's L2 cache, so the three passes over it
// (max, sum of exponentials, gradient) cost about one trip to memory; recomputing exp in the third pass is
// cheaper than storing the probabilities.
//
// A 16-bit row is first widened into a per-thread f32 copy, which the f32 loop runs on, and its gradient is rounded
// back once. The f32 loop then sums in the same order whatever the logits' dtype (the f16 conversions are calls that
// would keep the loops over a 16-bit row from vectorising), and the copy stays in L2 beside the row.
#include "common/ops/classifier.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "common/ops/cpu/vec_math.h"
#include "common/ops/dispatch.h"

namespace lab::ops::cpu {

namespace {

// The loss of one f32 row of Vp logits with target t; when dloss != 0 the row is overwritten with its gradient.
float row_loss_and_gradient(float* row, int64_t Vp, int64_t vocab, int64_t t, float dloss) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t v = 0; v < vocab; ++v) mx = row[v] > mx ? row[v] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t v = 0; v < vocab; ++v) sum += exp_fast(row[v] - mx);
  const float loss = std::log(sum) + mx - row[t];
  if (dloss == 0.0f) return loss;
  const float scale = dloss / sum;
#pragma omp simd
  for (int64_t v = 0; v < vocab; ++v) row[v] = exp_fast(row[v] - mx) * scale;
  row[t] -= dloss;
  for (int64_t v = vocab; v < Vp; ++v) row[v] = 0.0f;
  return loss;
}

}  // namespace

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss_scale) {
  const float dloss = dloss_scale.read();
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  const int32_t* tgt = targets.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    LAB_CHECK(tgt[n] >= 0 && tgt[n] < vocab, InvalidArgument, "fused_classifier: target ", tgt[n], " at row ", n,
              " is outside [0, ", vocab, ")");
  float* loss = losses.data<float>();
  dispatch_float_dtype(logits.dtype(), "fused_classifier", [&](auto tag) {
    using S = typename decltype(tag)::type;
    S* lp = logits.data<S>();
    if constexpr (std::is_same_v<S, float>) {
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) loss[n] = row_loss_and_gradient(lp + n * Vp, Vp, vocab, tgt[n], dloss);
    } else {
#pragma omp parallel
      {
        std::vector<float> scratch(static_cast<size_t>(Vp));
        float* wide = scratch.data();
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n) {
          S* row = lp + n * Vp;
          for (int64_t v = 0; v < Vp; ++v) wide[v] = to_float(row[v]);
          loss[n] = row_loss_and_gradient(wide, Vp, vocab, tgt[n], dloss);
          if (dloss == 0.0f) continue;
          for (int64_t v = 0; v < Vp; ++v) row[v] = from_float<S>(wide[v]);
        }
      }
    }
  });
}

}  // namespace lab::ops::cpu
