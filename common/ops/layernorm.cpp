#include "common/ops/layernorm.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
// Parameters, their gradients and the statistics stay f32 whatever the activations are (layernorm.h).
void check_fp32(const Tensor& t, const char* what, const char* op) {
  t.check_defined(what);
  LAB_CHECK(t.dtype() == DType::F32, InvalidArgument, op, ": ", what, " is ", dtype_name(t.dtype()),
            "; weight, bias, their gradients, mean and rstd are f32 whatever the activations are");
}

void check_layernorm(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const char* op) {
  LAB_CHECK(x.ndim() >= 1, InvalidArgument, op, ": input must have at least one dimension");
  const int64_t C = x.dim(-1), N = x.numel() / C;
  w.check_shape({C}, "layernorm weight");
  mean.check_shape({N}, "layernorm mean");
  rstd.check_shape({N}, "layernorm rstd");
  check_fp32(w, "weight", op);
  check_fp32(mean, "mean", op);
  check_fp32(rstd, "rstd", op);
}
}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  check_layernorm(x, w, mean, rstd, "layernorm_forward");
  check_same_float_dtype({&x, &out}, "layernorm_forward");
  check_fp32(b, "bias", "layernorm_forward");
  b.check_shape(w.shape(), "layernorm bias");
  out.check_shape(x.shape(), "layernorm out");
  check_same_device({&out, &mean, &rstd, &x, &w, &b}, "layernorm_forward");
  LAB_DISPATCH(x.device(), layernorm_forward, out, mean, rstd, x, w, b);
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write,
                        GradWrite dparams_write) {
  check_layernorm(x, w, mean, rstd, "layernorm_backward");
  check_same_float_dtype({&x, &dout, &dx}, "layernorm_backward");
  check_fp32(dw, "dw", "layernorm_backward");
  check_fp32(db, "db", "layernorm_backward");
  dout.check_shape(x.shape(), "layernorm dout");
  dx.check_shape(x.shape(), "layernorm dx");
  dw.check_shape(w.shape(), "layernorm dw");
  db.check_shape(w.shape(), "layernorm db");
  check_same_device({&dx, &dw, &db, &dout, &x, &w, &mean, &rstd}, "layernorm_backward");
  zero_when_no_rows(x.numel() == 0, dparams_write, {&dw, &db});
  LAB_DISPATCH(x.device(), layernorm_backward, dx, dw, db, dout, x, w, mean, rstd, dx_write, dparams_write);
}

}  // namespace lab::ops
