#include "common/ops/adamw.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale) {
  for (const Tensor* t : {&params, &grads, &m, &v}) {
    t->check_dtype(DType::F32, "adamw_update");
    LAB_CHECK(t->numel() == params.numel(), InvalidArgument, "adamw_update: buffers of different sizes (", t->numel(),
              " vs ", params.numel(), ")");
  }
  LAB_CHECK(hyper.step >= 1, InvalidArgument, "adamw_update: step must be >= 1, got ", hyper.step);
  check_same_device({&params, &grads, &m, &v}, "adamw_update");
  LAB_DISPATCH(params.device(), adamw_update, params, grads, m, v, hyper, grad_scale);
}

}  // namespace lab::ops
