#include "common/ops/classifier.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void check_classifier_arguments(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                                const GradScale& dloss) {
  logits.check_ndim(2, "classifier logits");
  LAB_CHECK(logits.dtype() == DType::F32 || logits.dtype() == DType::BF16 || logits.dtype() == DType::F16,
            InvalidArgument, "fused_classifier: logits is ", dtype_name(logits.dtype()),
            "; it must be f32, bf16 or f16");
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  LAB_CHECK(vocab > 0 && vocab <= Vp, InvalidArgument, "fused_classifier: vocab ", vocab, " with ", Vp,
            " logit columns");
  losses.check_shape({N}, "classifier losses");
  LAB_CHECK(losses.dtype() == DType::F32, InvalidArgument, "fused_classifier: losses is ", dtype_name(losses.dtype()),
            "; it must be f32 whatever the logits are (", dtype_name(logits.dtype()), " here)");
  LAB_CHECK(targets.numel() == N, InvalidArgument, "fused_classifier: ", targets.numel(), " targets for ", N, " rows");
  LAB_CHECK(targets.dtype() == DType::I32, InvalidArgument, "fused_classifier: targets is ",
            dtype_name(targets.dtype()), "; it must be i32");
  dloss.check("fused_classifier dloss");
  check_same_device({&logits, &losses, &targets, &dloss.on_device}, "fused_classifier");
}

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const GradScale& dloss) {
  check_classifier_arguments(logits, losses, targets, vocab, dloss);
  LAB_DISPATCH(logits.device(), fused_classifier, logits, losses, targets, vocab, dloss);
}

}  // namespace lab::ops
