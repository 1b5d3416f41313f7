#include "common/ops/gelu.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void gelu_forward(const Tensor& out, const Tensor& x) {
  check_same_float_dtype({&x, &out}, "gelu_forward");
  LAB_CHECK(out.numel() == x.numel(), InvalidArgument, "gelu_forward: ", out.numel(), " outputs for ", x.numel(),
            " inputs");
  check_same_device({&out, &x}, "gelu_forward");
  LAB_DISPATCH(x.device(), gelu_forward, out, x);
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write) {
  check_same_float_dtype({&x, &dx, &dout}, "gelu_backward");
  LAB_CHECK(dx.numel() == x.numel() && dout.numel() == x.numel(), InvalidArgument,
            "gelu_backward: element counts differ");
  check_same_device({&dx, &x, &dout}, "gelu_backward");
  LAB_DISPATCH(x.device(), gelu_backward, dx, x, dout, dx_write);
}

}  // namespace lab::ops
