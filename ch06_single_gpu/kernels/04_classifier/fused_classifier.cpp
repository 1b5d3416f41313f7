// ch06_single_gpu/fused_classifier.h: the core's checks (once, for both backends), dispatch by device, and the
// CPU path.
#include "ch06_single_gpu/fused_classifier.h"

#include "common/ops/classifier.h"
#include "common/ops/dispatch.h"

namespace lab::ch06 {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const ops::GradScale& dloss) {
  ops::check_classifier_arguments(logits, losses, targets, vocab, dloss);
  LAB_DISPATCH(logits.device(), fused_classifier, logits, losses, targets, vocab, dloss);
}

// The core's fused loop (three passes over each row, which stays in L2 between them): the lab's CPU loop with
// the online pass measured no faster (kernels/04_classifier/README.md).
void cpu::fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                           const ops::GradScale& dloss) {
  ops::cpu::fused_classifier(logits, losses, targets, vocab, dloss);
}

}  // namespace lab::ch06
