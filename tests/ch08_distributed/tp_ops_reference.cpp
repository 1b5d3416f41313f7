// The vocabulary-parallel cross-entropy over slices in one process (see tp_ops_reference.h).
#include "tests/ch08_distributed/tp_ops_reference.h"

#include <algorithm>
#include <cmath>

#include "ch08_distributed/tp/vocab_parallel_ops.h"

namespace lab::test {

SlicedCrossEntropy sliced_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, int tp,
                                        float dloss) {
  const Device device = logits.device();
  const int64_t N = logits.dim(0), Vp = logits.dim(1), S = Vp / tp;
  const std::vector<float> whole = logits.to_floats();
  std::vector<Tensor> slices;
  for (int r = 0; r < tp; ++r) {
    std::vector<float> part(static_cast<size_t>(N * S));
    for (int64_t n = 0; n < N; ++n) std::copy_n(whole.begin() + n * Vp + r * S, S, part.begin() + n * S);
    slices.push_back(Tensor::from_floats(part, {N, S}, device));
  }
  // Pass 1, then the all-reduces of the maxima (max) and of the target logits (sum).
  std::vector<float> row_max(static_cast<size_t>(N), -INFINITY), target_logit(static_cast<size_t>(N), 0.0f);
  for (int r = 0; r < tp; ++r) {
    const Tensor mx = Tensor::empty({N}, DType::F32, device), tl = Tensor::empty({N}, DType::F32, device);
    ch08::tp::vocab_slice_max_and_target(slices[r], targets, r * S, vocab, mx, tl);
    const std::vector<float> m = mx.to_floats(), t = tl.to_floats();
    for (int64_t n = 0; n < N; ++n) {
      row_max[n] = std::max(row_max[n], m[n]);
      target_logit[n] += t[n];
    }
  }
  const Tensor global_max = Tensor::from_floats(row_max, {N}, device);
  // Pass 2, then the sum of the sums of exponentials.
  std::vector<float> sum_exp(static_cast<size_t>(N), 0.0f);
  for (int r = 0; r < tp; ++r) {
    const Tensor se = Tensor::empty({N}, DType::F32, device);
    ch08::tp::vocab_slice_sum_exp(slices[r], global_max, r * S, vocab, se);
    const std::vector<float> s = se.to_floats();
    for (int64_t n = 0; n < N; ++n) sum_exp[n] += s[n];
  }
  // Pass 3 on every slice.
  SlicedCrossEntropy out;
  out.grads.resize(static_cast<size_t>(N * Vp));
  const Tensor sums = Tensor::from_floats(sum_exp, {N}, device);
  const Tensor targets_logit = Tensor::from_floats(target_logit, {N}, device);
  for (int r = 0; r < tp; ++r) {
    const Tensor losses = Tensor::empty({N}, DType::F32, device);
    ch08::tp::vocab_slice_loss_and_grad(slices[r], losses, targets, global_max, sums, targets_logit, r * S, vocab,
                                        dloss);
    if (r == 0) out.losses = losses.to_floats();
    const std::vector<float> g = slices[r].to_floats();
    for (int64_t n = 0; n < N; ++n) std::copy_n(g.begin() + n * S, S, out.grads.begin() + n * Vp + r * S);
  }
  return out;
}

}  // namespace lab::test
