// Fused classifier: softmax + cross-entropy (+ its backward) without materialising probabilities.
//
// logits [N, Vp] hold the scores of the padded vocabulary; only the first `vocab` columns are real.
//   losses[n] = logsumexp(logits[n, :vocab]) - logits[n, targets[n]]
// When dloss != 0 the same pass overwrites logits with the gradient of (dloss * sum_n losses[n]):
//   logits[n, v] = dloss * (softmax(logits[n, :vocab])[v] - [v == targets[n]])   for v < vocab
//   logits[n, v] = 0                                                             for vocab <= v < Vp
// so the caller passes dloss = 1/N for a mean loss (and when dloss == 0 the logits are left as they were). dloss is
// a GradScale: a number, or dloss.value times a scale on the device that the kernel reads (fp16's loss scale, which
// the training step keeps there); whether there is a backward at all is dloss.value != 0.
// Targets are i32 in [0, vocab); losses [N] f32.
// Dtypes: logits f32, or bf16 / f16 with fp32 arithmetic inside: each logit is widened to f32, the maximum, the sum
// of exponentials and the loss are f32, and each gradient element is rounded once, when stored. The losses are f32
// whatever the logits are.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_scale.h"

namespace lab::ops {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss);
// An implementation of fused_classifier's contract (this one, or another such as chapter 6's promoted kernel).
using ClassifierFn = void (*)(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                              const GradScale& dloss);
// The checks fused_classifier makes before it dispatches (shapes, dtypes, vocab, dloss, one device), for other
// implementations of the same contract.
void check_classifier_arguments(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                                const GradScale& dloss);

namespace cpu {
void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss);
}  // namespace cpu
namespace cuda {
void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss);
}  // namespace cuda

}  // namespace lab::ops
