#include "common/ops/dispatch.h"

namespace lab::ops {

void check_same_device(std::initializer_list<const Tensor*> tensors, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    LAB_CHECK(t->device() == first->device(), InvalidArgument, op, ": tensors on different devices (",
              first->device().str(), " and ", t->device().str(), ")");
  }
}

void check_same_float_dtype(std::initializer_list<const Tensor*> tensors, const char* op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      LAB_CHECK(t->dtype() == DType::F32 || t->dtype() == DType::BF16 || t->dtype() == DType::F16, InvalidArgument, op,
                ": ", dtype_name(t->dtype()), " tensors (expected f32, bf16 or f16)");
      continue;
    }
    LAB_CHECK(t->dtype() == first->dtype(), InvalidArgument, op, ": tensors of different dtypes (",
              dtype_name(first->dtype()), " and ", dtype_name(t->dtype()), ")");
  }
}

}  // namespace lab::ops
