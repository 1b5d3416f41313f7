// What every differentiable function needs, in the core (functions.h) and in the chapters' own (fused ops,
// tensor-parallel functions, recompute): outputs allocated as activation memory, and the test of whether a
// function must record its backward at all.
#pragma once

#include <initializer_list>

#include "common/autograd/var.h"
#include "common/core/memory.h"
#include "common/core/tensor.h"

namespace lab::ag {

// A new tensor with the given shape on the device (and of the dtype) of `like`, counted as activation memory:
// the category the memory report and snapshot charge a forward pass's outputs to.
inline Tensor new_activation(const Shape& shape, const Tensor& like) {
  MemoryScope scope(MemCategory::Activations);
  return Tensor::empty(shape, like.dtype(), like.device());
}

// True when some defined Var of `vars` wants a gradient: only then does a function record its backward.
inline bool any_requires_grad(std::initializer_list<const Var*> vars) {
  for (const Var* v : vars)
    if (v->defined() && v->requires_grad()) return true;
  return false;
}

}  // namespace lab::ag
