// Argument checks of the AdamW op, then dispatch (see adamw.h).
#include "common/ops/adamw.h"

#include <cmath>

#include "common/ops/dispatch.h"

namespace lab::ops {

std::vector<float> adamw_step_values(const AdamWHyper& hyper) {
  const double t = static_cast<double>(hyper.step);
  std::vector<float> values(kStepValues);
  values[kStepLr] = hyper.lr;
  values[kStepBiasCorrection1] = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), t));
  values[kStepBiasCorrection2] = static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), t));
  return values;
}

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay, const Tensor& params_16bit) {
  for (const Tensor* t : {&params, &grads, &m, &v}) {
    t->check_dtype(DType::F32, "adamw_update");
    LAB_CHECK(t->numel() == params.numel(), InvalidArgument, "adamw_update: buffers of different sizes (", t->numel(),
              " vs ", params.numel(), ")");
  }
  if (hyper.step_values.defined()) {
    hyper.step_values.check_dtype(DType::F32, "adamw_update step_values");
    LAB_CHECK(hyper.step_values.numel() == kStepValues, InvalidArgument, "adamw_update: step_values has ",
              hyper.step_values.numel(), " elements, not ", int64_t{kStepValues}, " (lr and the bias corrections)");
  } else {
    LAB_CHECK(hyper.step >= 1, InvalidArgument, "adamw_update: step must be >= 1, got ", hyper.step);
  }
  int64_t previous_end = 0;
  for (const ElementRange& r : decay) {
    LAB_CHECK(previous_end <= r.begin && r.begin <= r.end && r.end <= params.numel(), InvalidArgument,
              "adamw_update: decay range [", r.begin, ", ", r.end, ") is not sorted, disjoint and inside [0, ",
              params.numel(), ")");
    previous_end = r.end;
  }
  grad_scale.check("adamw_update grad_scale");
  if (params_16bit.defined()) {
    LAB_CHECK(params_16bit.dtype() == DType::BF16 || params_16bit.dtype() == DType::F16, InvalidArgument,
              "adamw_update: the parameters' 16-bit copy must be bf16 or f16, got ", dtype_name(params_16bit.dtype()));
    LAB_CHECK(params_16bit.numel() == params.numel(), InvalidArgument, "adamw_update: a 16-bit copy of ",
              params_16bit.numel(), " elements for ", params.numel(), " parameters");
  }
  check_same_device({&params, &grads, &m, &v, &grad_scale.on_device, &hyper.step_values, &params_16bit},
                    "adamw_update");
  LAB_DISPATCH(params.device(), adamw_update, params, grads, m, v, hyper, grad_scale, decay, params_16bit);
}

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale) {
  adamw_update(params, grads, m, v, hyper, grad_scale, {{0, params.numel()}});
}

}  // namespace lab::ops
