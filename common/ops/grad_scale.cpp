// ops::GradScale (see grad_scale.h).
#include "common/ops/grad_scale.h"

namespace lab::ops {

float GradScale::read() const {
  if (!on_device.defined()) return value;
  return value * static_cast<float>(on_device.view(0, {1}).item());
}

void GradScale::check(const char* what) const {
  if (!on_device.defined()) return;
  on_device.check_dtype(DType::F32, what);
  LAB_CHECK(on_device.numel() >= 1, InvalidArgument, what, ": an empty scale tensor");
}

}  // namespace lab::ops
