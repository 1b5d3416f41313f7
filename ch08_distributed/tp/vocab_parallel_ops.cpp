// Shape, dtype and device checks of vocab_parallel_ops.h (once, for both backends), then dispatch by device.
#include "ch08_distributed/tp/vocab_parallel_ops.h"

#include "common/ops/dispatch.h"

namespace lab::ch08::tp {

namespace {

void check_logits_and_targets(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                              const char* op) {
  logits_slice.check_ndim(2, "vocab-parallel logits");
  logits_slice.check_dtype(DType::F32, "vocab-parallel logits");
  targets.check_dtype(DType::I32, "vocab-parallel targets");
  LAB_CHECK(targets.numel() == logits_slice.dim(0), InvalidArgument, op, ": ", targets.numel(), " targets for ",
            logits_slice.dim(0), " rows");
  LAB_CHECK(vocab_start >= 0 && vocab > 0, InvalidArgument, op, ": vocab_start ", vocab_start, ", vocab ", vocab);
}

void check_row_stat(const Tensor& t, int64_t rows, const char* what) {
  t.check_shape({rows}, what);
  t.check_dtype(DType::F32, what);
}

}  // namespace

void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows) {
  tokens.check_dtype(DType::I32, "embedding tokens");
  tokens.check_ndim(2, "embedding tokens");
  wte_slice.check_ndim(2, "embedding wte slice");
  out.check_shape({tokens.dim(0), tokens.dim(1), wte_slice.dim(1)}, "embedding out");
  for (const Tensor* t : {&out, &wte_slice}) t->check_dtype(DType::F32, "vocab_slice_embedding_forward");
  LAB_CHECK(vocab_start >= 0 && vocab_start + wte_slice.dim(0) <= vocab_rows, InvalidArgument,
            "vocab_slice_embedding_forward: rows [", vocab_start, ", ", vocab_start + wte_slice.dim(0),
            ") are not within the table's ", vocab_rows);
  ops::check_same_device({&out, &tokens, &wte_slice}, "vocab_slice_embedding_forward");
  LAB_DISPATCH(out.device(), vocab_slice_embedding_forward, out, tokens, wte_slice, vocab_start, vocab_rows);
}

void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit) {
  check_logits_and_targets(logits_slice, targets, vocab_start, vocab, "vocab_slice_max_and_target");
  check_row_stat(row_max, logits_slice.dim(0), "row_max");
  check_row_stat(target_logit, logits_slice.dim(0), "target_logit");
  ops::check_same_device({&logits_slice, &targets, &row_max, &target_logit}, "vocab_slice_max_and_target");
  LAB_DISPATCH(logits_slice.device(), vocab_slice_max_and_target, logits_slice, targets, vocab_start, vocab, row_max,
               target_logit);
}

void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp) {
  logits_slice.check_ndim(2, "vocab-parallel logits");
  logits_slice.check_dtype(DType::F32, "vocab-parallel logits");
  check_row_stat(row_max, logits_slice.dim(0), "row_max");
  check_row_stat(sum_exp, logits_slice.dim(0), "sum_exp");
  ops::check_same_device({&logits_slice, &row_max, &sum_exp}, "vocab_slice_sum_exp");
  LAB_DISPATCH(logits_slice.device(), vocab_slice_sum_exp, logits_slice, row_max, vocab_start, vocab, sum_exp);
}

void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss) {
  check_logits_and_targets(logits_slice, targets, vocab_start, vocab, "vocab_slice_loss_and_grad");
  const int64_t N = logits_slice.dim(0);
  check_row_stat(losses, N, "losses");
  check_row_stat(row_max, N, "row_max");
  check_row_stat(sum_exp, N, "sum_exp");
  check_row_stat(target_logit, N, "target_logit");
  dloss.check("vocab_slice_loss_and_grad dloss");
  ops::check_same_device({&logits_slice, &losses, &targets, &row_max, &sum_exp, &target_logit, &dloss.on_device},
                         "vocab_slice_loss_and_grad");
  LAB_DISPATCH(logits_slice.device(), vocab_slice_loss_and_grad, logits_slice, losses, targets, row_max, sum_exp,
               target_logit, vocab_start, vocab, dloss);
}

void add_bias(const Tensor& x, const Tensor& bias) {
  for (const Tensor* t : {&x, &bias}) t->check_dtype(DType::F32, "add_bias");
  LAB_CHECK(bias.numel() > 0 && x.numel() % bias.numel() == 0, InvalidArgument, "add_bias: ", shape_str(x.shape()),
            " is not rows of a bias of ", bias.numel());
  ops::check_same_device({&x, &bias}, "add_bias");
  LAB_DISPATCH(x.device(), add_bias, x, bias);
}

void add_bias_grad(const Tensor& dbias, const Tensor& dout) {
  for (const Tensor* t : {&dbias, &dout}) t->check_dtype(DType::F32, "add_bias_grad");
  LAB_CHECK(dbias.numel() > 0 && dout.numel() % dbias.numel() == 0, InvalidArgument,
            "add_bias_grad: ", shape_str(dout.shape()), " is not rows of a bias of ", dbias.numel());
  ops::check_same_device({&dbias, &dout}, "add_bias_grad");
  LAB_DISPATCH(dout.device(), add_bias_grad, dbias, dout);
}

}  // namespace lab::ch08::tp
