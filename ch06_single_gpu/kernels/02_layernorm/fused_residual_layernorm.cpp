// Shape, dtype and device checks of ch06_single_gpu/fused_residual_layernorm.h (once, for both backends), then
// dispatch by device.
#include "ch06_single_gpu/fused_residual_layernorm.h"

#include "common/ops/dispatch.h"

namespace lab::ch06 {

namespace {

// Checks the tensors every call has: `x` (the [N, C] residual stream: f32, bf16 or f16), weight [C], mean and
// rstd [N] (f32). Returns C.
int64_t check_common(const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd, const char* op) {
  ops::check_same_float_dtype({&x}, op);
  for (const Tensor* t : {&weight, &mean, &rstd}) t->check_dtype(DType::F32, op);
  LAB_CHECK(x.ndim() >= 1, InvalidArgument, op, ": input must have at least one dimension");
  const int64_t C = x.dim(-1), N = C > 0 ? x.numel() / C : 0;
  weight.check_shape({C}, "fused_residual_layernorm weight");
  mean.check_shape({N}, "fused_residual_layernorm mean");
  rstd.check_shape({N}, "fused_residual_layernorm rstd");
  return C;
}

// An [N, C] tensor (`what`) with x's shape and dtype; undefined is accepted when `optional`.
void check_like(const Tensor& t, const Tensor& x, const char* what, bool optional = false) {
  if (optional && !t.defined()) return;
  t.check_dtype(x.dtype(), what);
  t.check_shape(x.shape(), what);
}

// dweight and dbias: f32, of weight's shape.
void check_parameter_grads(const Tensor& dweight, const Tensor& dbias, const Tensor& weight, const char* op) {
  for (const Tensor* t : {&dweight, &dbias}) {
    t->check_dtype(DType::F32, op);
    t->check_shape(weight.shape(),
                   t == &dweight ? "fused_residual_layernorm dweight" : "fused_residual_layernorm dbias");
  }
}

}  // namespace

void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias) {
  const char* op = "fused_residual_layernorm_forward";
  check_common(a, weight, mean, rstd, op);
  check_like(b, a, "fused_residual_layernorm b");
  check_like(residual, a, "fused_residual_layernorm residual");
  check_like(out, a, "fused_residual_layernorm out");
  bias.check_dtype(DType::F32, op);
  bias.check_shape(weight.shape(), "fused_residual_layernorm bias");
  ops::check_same_device({&residual, &out, &mean, &rstd, &a, &b, &weight, &bias}, op);
  LAB_DISPATCH(a.device(), fused_residual_layernorm_forward, residual, out, mean, rstd, a, b, weight, bias);
}

void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write) {
  const char* op = "fused_residual_layernorm_backward";
  check_common(residual, weight, mean, rstd, op);
  check_like(dout, residual, "fused_residual_layernorm dout");
  check_like(dresidual, residual, "fused_residual_layernorm dresidual", true);
  check_like(da, residual, "fused_residual_layernorm da", true);
  check_like(db, residual, "fused_residual_layernorm db", true);
  LAB_CHECK(residual.dtype() == DType::F32, InvalidArgument, op,
            ": takes f32 activations; 16-bit ones take fused_residual_layernorm_backward_through");
  check_parameter_grads(dweight, dbias, weight, op);
  ops::check_same_device({&da, &db, &dweight, &dbias, &dresidual, &dout, &residual, &weight, &mean, &rstd}, op);
  ops::zero_when_no_rows(residual.numel() == 0, dparams_write, {&dweight, &dbias});
  LAB_DISPATCH(residual.device(), fused_residual_layernorm_backward, da, db, dweight, dbias, dresidual, dout, residual,
               weight, mean, rstd, dparams_write);
}

void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write) {
  const char* op = "fused_residual_layernorm_backward_through";
  check_common(residual, weight, mean, rstd, op);
  check_like(dout, residual, "fused_residual_layernorm dout");
  check_like(dsum, residual, "fused_residual_layernorm dsum");
  check_like(dcopy, residual, "fused_residual_layernorm dcopy", true);
  check_parameter_grads(dweight, dbias, weight, op);
  ops::check_same_device({&dsum, &dcopy, &dweight, &dbias, &dout, &residual, &weight, &mean, &rstd}, op);
  ops::zero_when_no_rows(residual.numel() == 0, dparams_write, {&dweight, &dbias});
  LAB_DISPATCH(residual.device(), fused_residual_layernorm_backward_through, dsum, dsum_write, dcopy, dweight, dbias,
               dout, residual, weight, mean, rstd, dparams_write);
}

}  // namespace lab::ch06
