#include "common/ops/residual.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  check_same_float_dtype({&out, &a, &b}, "residual_forward");
  LAB_CHECK(a.numel() == out.numel() && b.numel() == out.numel(), InvalidArgument,
            "residual_forward: element counts differ (", a.numel(), ", ", b.numel(), " -> ", out.numel(), ")");
  check_same_device({&out, &a, &b}, "residual_forward");
  LAB_DISPATCH(out.device(), residual_forward, out, a, b);
}

void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  check_same_float_dtype({&dout, &da, &db}, "residual_backward");
  for (const Tensor* t : {&da, &db})
    LAB_CHECK(!t->defined() || t->numel() == dout.numel(), InvalidArgument, "residual_backward: element counts differ");
  check_same_device({&da, &db, &dout}, "residual_backward");
  LAB_DISPATCH(dout.device(), residual_backward, da, db, dout);
}

void residual_gradient_copy(const Tensor& dx, const Tensor& dout) {
  check_same_float_dtype({&dx, &dout}, "residual_gradient_copy");
  LAB_CHECK(dx.numel() == dout.numel(), InvalidArgument, "residual_gradient_copy: element counts differ (",
            dout.numel(), " -> ", dx.numel(), ")");
  check_same_device({&dx, &dout}, "residual_gradient_copy");
  LAB_DISPATCH(dout.device(), residual_gradient_copy, dx, dout);
}

}  // namespace lab::ops
