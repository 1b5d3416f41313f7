// CPU reference of ch08_distributed/tp/vocab_parallel_ops.h.
//
// The same loops as the core's embedding and classifier (common/ops/cpu/), restricted to this rank's slice
// of the vocabulary: rows are independent, so each is one OpenMP iteration; the embedding's backward and the
// bias gradient parallelise over column slices, so repeated tokens never race and the order of additions is
// fixed (thread-count independent).
#include "ch08_distributed/tp/vocab_parallel_ops.h"

#include <algorithm>
#include <cmath>

#include "common/ops/cpu/column_sums.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ch08::tp::cpu {

using ops::cpu::exp_fast;

namespace {

// This slice's real columns: [0, real) of the slice's S columns (the rest are vocabulary padding).
int64_t real_columns(int64_t slice_columns, int64_t vocab_start, int64_t vocab) {
  return std::clamp<int64_t>(vocab - vocab_start, 0, slice_columns);
}

void check_targets(const Tensor& targets, int64_t vocab) {
  const int32_t* tgt = targets.data<int32_t>();
  for (int64_t n = 0; n < targets.numel(); ++n)
    LAB_CHECK(tgt[n] >= 0 && tgt[n] < vocab, InvalidArgument, "vocab-parallel cross-entropy: target ", tgt[n],
              " at row ", n, " is outside [0, ", vocab, ")");
}

}  // namespace

void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows) {
  const int64_t BT = tokens.numel(), S = wte_slice.dim(0), C = wte_slice.dim(1);
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < BT; ++i)
    LAB_CHECK(tok[i] >= 0 && tok[i] < vocab_rows, InvalidArgument, "embedding: token id ", tok[i], " at position ", i,
              " is outside the vocabulary [0, ", vocab_rows, ")");
  const float* te = wte_slice.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < BT; ++i) {
    const int64_t row = tok[i] - vocab_start;
    float* orow = o + i * C;
    if (row < 0 || row >= S) {
      std::fill(orow, orow + C, 0.0f);
      continue;
    }
    std::copy(te + row * C, te + (row + 1) * C, orow);
  }
}

void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit) {
  check_targets(targets, vocab);
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  const int64_t real = real_columns(S, vocab_start, vocab);
  const float* lp = logits_slice.data<float>();
  const int32_t* tgt = targets.data<int32_t>();
  float* mx_out = row_max.data<float>();
  float* tl_out = target_logit.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = lp + n * S;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < real; ++v) mx = row[v] > mx ? row[v] : mx;
    mx_out[n] = mx;
    const int64_t t = tgt[n] - vocab_start;
    tl_out[n] = t >= 0 && t < real ? row[t] : 0.0f;
  }
}

void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp) {
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  const int64_t real = real_columns(S, vocab_start, vocab);
  const float* lp = logits_slice.data<float>();
  const float* mx = row_max.data<float>();
  float* out = sum_exp.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = lp + n * S;
    const float m = mx[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t v = 0; v < real; ++v) sum += exp_fast(row[v] - m);
    out[n] = sum;
  }
}

void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss_scale) {
  check_targets(targets, vocab);
  const float dloss = dloss_scale.read();
  const int64_t N = logits_slice.dim(0), S = logits_slice.dim(1);
  const int64_t real = real_columns(S, vocab_start, vocab);
  float* lp = logits_slice.data<float>();
  const int32_t* tgt = targets.data<int32_t>();
  const float* mx = row_max.data<float>();
  const float* se = sum_exp.data<float>();
  const float* tl = target_logit.data<float>();
  float* loss = losses.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    loss[n] = std::log(se[n]) + mx[n] - tl[n];
    if (dloss == 0.0f) continue;
    float* row = lp + n * S;
    const float m = mx[n], scale = dloss / se[n];
#pragma omp simd
    for (int64_t v = 0; v < real; ++v) row[v] = exp_fast(row[v] - m) * scale;
    std::fill(row + real, row + S, 0.0f);
    const int64_t t = tgt[n] - vocab_start;
    if (t >= 0 && t < real) row[t] -= dloss;
  }
}

void add_bias(const Tensor& x, const Tensor& bias) {
  const int64_t K = bias.numel(), N = x.numel() / K;
  float* xp = x.data<float>();
  const float* b = bias.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* row = xp + n * K;
#pragma omp simd
    for (int64_t k = 0; k < K; ++k) row[k] += b[k];
  }
}

void add_bias_grad(const Tensor& dbias, const Tensor& dout) {
  const int64_t K = dbias.numel();
  ops::cpu::add_column_sums(dbias.data<float>(), dout.data<float>(), dout.numel() / K, K);
}

}  // namespace lab::ch08::tp::cpu
