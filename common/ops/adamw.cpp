// Argument checks of the AdamW op, then dispatch (see adamw.h).
#include "common/ops/adamw.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay) {
  for (const Tensor* t : {&params, &grads, &m, &v}) {
    t->check_dtype(DType::F32, "adamw_update");
    LAB_CHECK(t->numel() == params.numel(), InvalidArgument, "adamw_update: buffers of different sizes (", t->numel(),
              " vs ", params.numel(), ")");
  }
  LAB_CHECK(hyper.step >= 1, InvalidArgument, "adamw_update: step must be >= 1, got ", hyper.step);
  int64_t previous_end = 0;
  for (const ElementRange& r : decay) {
    LAB_CHECK(previous_end <= r.begin && r.begin <= r.end && r.end <= params.numel(), InvalidArgument,
              "adamw_update: decay range [", r.begin, ", ", r.end, ") is not sorted, disjoint and inside [0, ",
              params.numel(), ")");
    previous_end = r.end;
  }
  if (grad_scale.on_device.defined()) {
    grad_scale.on_device.check_dtype(DType::F32, "adamw_update grad_scale");
    LAB_CHECK(grad_scale.on_device.numel() >= 1, InvalidArgument, "adamw_update: an empty grad_scale tensor");
  }
  check_same_device({&params, &grads, &m, &v, &grad_scale.on_device}, "adamw_update");
  LAB_DISPATCH(params.device(), adamw_update, params, grads, m, v, hyper, grad_scale, decay);
}

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale) {
  adamw_update(params, grads, m, v, hyper, grad_scale, {{0, params.numel()}});
}

}  // namespace lab::ops
