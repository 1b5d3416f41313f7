#include "common/ops/layernorm.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

namespace {
void check_layernorm(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, const char* op) {
  LAB_CHECK(x.ndim() >= 1, InvalidArgument, op, ": input must have at least one dimension");
  const int64_t C = x.dim(-1), N = x.numel() / C;
  w.check_shape({C}, "layernorm weight");
  mean.check_shape({N}, "layernorm mean");
  rstd.check_shape({N}, "layernorm rstd");
  for (const Tensor* t : {&x, &w, &mean, &rstd}) t->check_dtype(DType::F32, op);
}
}  // namespace

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  check_layernorm(x, w, mean, rstd, "layernorm_forward");
  b.check_shape(w.shape(), "layernorm bias");
  out.check_shape(x.shape(), "layernorm out");
  check_same_device({&out, &mean, &rstd, &x, &w, &b}, "layernorm_forward");
  LAB_DISPATCH(x.device(), layernorm_forward, out, mean, rstd, x, w, b);
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  check_layernorm(x, w, mean, rstd, "layernorm_backward");
  dout.check_shape(x.shape(), "layernorm dout");
  dx.check_shape(x.shape(), "layernorm dx");
  dw.check_shape(w.shape(), "layernorm dw");
  db.check_shape(w.shape(), "layernorm db");
  check_same_device({&dx, &dw, &db, &dout, &x, &w, &mean, &rstd}, "layernorm_backward");
  LAB_DISPATCH(x.device(), layernorm_backward, dx, dw, db, dout, x, w, mean, rstd);
}

}  // namespace lab::ops
