// Var: a tensor value together with its gradient, shared by handle.
//
// Parameters are Vars whose value and gradient are views into the model's flat buffers (bound up front).
// Activations are Vars whose gradient is allocated (zero-filled) the first time a backward step asks for it.
// Every backward op accumulates (+=) into grad(), so a value used twice simply receives both contributions.
#pragma once

#include <memory>

#include "common/core/tensor.h"

namespace lab {

class Var {
 public:
  Var() = default;
  // An activation or input. requires_grad=false means backward never computes its gradient.
  explicit Var(Tensor value, bool requires_grad = true);
  // A parameter whose gradient lives in a preallocated buffer (same shape and device as the value).
  static Var parameter(Tensor value, Tensor grad);

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const;
  bool requires_grad() const;
  // The gradient, allocated as zeros on first use; throws if this Var does not require a gradient.
  const Tensor& grad() const;
  // The gradient if requires_grad, else an undefined Tensor: what backward ops pass as "maybe skip".
  Tensor grad_or_none() const;
  // Makes `g` the gradient buffer (used by the fused classifier, which computes dlogits in place).
  void bind_grad(Tensor g) const;

 private:
  struct Node {
    Tensor value;
    mutable Tensor grad;
    bool requires_grad = true;
  };
  std::shared_ptr<Node> node_;
};

}  // namespace lab
