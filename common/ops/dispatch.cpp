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

}  // namespace lab::ops
