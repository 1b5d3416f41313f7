#include "common/ops/classifier.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss) {
  logits.check_ndim(2, "classifier logits");
  logits.check_dtype(DType::F32, "classifier logits");
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  LAB_CHECK(vocab > 0 && vocab <= Vp, InvalidArgument, "fused_classifier: vocab ", vocab, " with ", Vp,
            " logit columns");
  losses.check_shape({N}, "classifier losses");
  losses.check_dtype(DType::F32, "classifier losses");
  LAB_CHECK(targets.numel() == N, InvalidArgument, "fused_classifier: ", targets.numel(), " targets for ", N, " rows");
  targets.check_dtype(DType::I32, "classifier targets");
  check_same_device({&logits, &losses, &targets}, "fused_classifier");
  LAB_DISPATCH(logits.device(), fused_classifier, logits, losses, targets, vocab, dloss);
}

}  // namespace lab::ops
