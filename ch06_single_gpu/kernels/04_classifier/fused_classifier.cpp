// Shape, dtype and device checks of ch06_single_gpu/fused_classifier.h (once, for both backends), then
// dispatch by device; the CPU path.
#include "ch06_single_gpu/fused_classifier.h"

#include "common/ops/classifier.h"
#include "common/ops/dispatch.h"

namespace lab::ch06 {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  logits.check_ndim(2, "fused_classifier logits");
  logits.check_dtype(DType::F32, "fused_classifier logits");
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  LAB_CHECK(vocab > 0 && vocab <= Vp, InvalidArgument, "fused_classifier: vocab ", vocab, " with ", Vp,
            " logit columns");
  losses.check_shape({N}, "fused_classifier losses");
  losses.check_dtype(DType::F32, "fused_classifier losses");
  LAB_CHECK(targets.numel() == N, InvalidArgument, "fused_classifier: ", targets.numel(), " targets for ", N, " rows");
  targets.check_dtype(DType::I32, "fused_classifier targets");
  ops::check_same_device({&logits, &losses, &targets}, "fused_classifier");
  LAB_DISPATCH(logits.device(), fused_classifier, logits, losses, targets, vocab, dloss);
}

// The core's fused loop (three passes over each row, which stays in L2 between them): the lab's CPU loop with
// the online pass measured no faster (kernels/04_classifier/README.md).
void cpu::fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                           float dloss) {
  ops::cpu::fused_classifier(logits, losses, targets, vocab, dloss);
}

}  // namespace lab::ch06
