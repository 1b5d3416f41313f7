// Values, gradients and gradient hooks (see var.h).
#include "common/autograd/var.h"

namespace lab {

Var::Var(Tensor value, bool requires_grad) : node_(std::make_shared<Node>()) {
  value.check_defined("Var");
  node_->shape = value.shape();
  node_->dtype = value.dtype();
  node_->device = value.device();
  node_->requires_grad = requires_grad;
  value_ = std::make_shared<Tensor>(std::move(value));
}

Var Var::parameter(Tensor value, Tensor grad) {
  LAB_CHECK(grad.numel() == value.numel() && grad.device() == value.device(), InvalidArgument, "parameter gradient ",
            shape_str(grad.shape()), " on ", grad.device().str(), " does not match value ", shape_str(value.shape()),
            " on ", value.device().str());
  Var v(std::move(value), true);
  v.node_->grad = std::move(grad);
  v.node_->parameter = true;
  return v;
}

const Tensor& Var::value() const {
  LAB_CHECK(node_, InvalidArgument, "use of an undefined Var");
  LAB_CHECK(value_, InvalidArgument, "the value of a Var of shape ", shape_str(node_->shape),
            " read through a handle that holds its gradient only (Var::without_value)");
  return *value_;
}

Var Var::without_value() const {
  if (!node_ || node_->parameter) return *this;
  Var handle;
  handle.node_ = node_;
  return handle;
}

bool Var::requires_grad() const {
  return node_ && node_->requires_grad;
}

const Tensor& Var::grad() const {
  LAB_CHECK(requires_grad(), InvalidArgument, "grad() of a Var that does not require a gradient");
  if (!node_->grad.defined()) {
    MemoryScope scope(node_->parameter ? MemCategory::Grads : MemCategory::Activations);
    node_->grad = Tensor::zeros(node_->shape, node_->dtype, node_->device);
  } else if (node_->grad_stale) {
    node_->grad.zero_();
    node_->grad_stale = false;
  }
  return node_->grad;
}

Tensor Var::grad_or_none() const {
  return requires_grad() ? grad() : Tensor();
}

void Var::bind_grad(Tensor g) const {
  LAB_CHECK(requires_grad(), InvalidArgument, "bind_grad on a Var that does not require a gradient");
  node_->grad = std::move(g);
  node_->grad_stale = false;
}

bool Var::grad_unallocated() const {
  return requires_grad() && !node_->parameter && !node_->grad.defined();
}

void Var::mark_grad_stale() const {
  LAB_CHECK(node_ && node_->parameter, InvalidArgument, "mark_grad_stale on a Var that is not a parameter");
  node_->grad_stale = node_->requires_grad && node_->grad.defined();
}

bool Var::grad_stale() const {
  return node_ && node_->grad_stale;
}

const Tensor& Var::take_stale_grad() const {
  LAB_CHECK(grad_stale(), InvalidArgument, "take_stale_grad on a Var whose gradient is not stale");
  node_->grad_stale = false;
  return node_->grad;
}

Tensor Var::bind_new_grad(MemCategory category) const {
  LAB_CHECK(requires_grad(), InvalidArgument, "bind_new_grad on a Var that does not require a gradient");
  MemoryScope scope(category);
  node_->grad = Tensor::empty(node_->shape, node_->dtype, node_->device);
  node_->grad_stale = false;
  return node_->grad;
}

void Var::bind_value(Tensor v) const {
  LAB_CHECK(node_ && node_->parameter, InvalidArgument, "bind_value on a Var that is not a parameter");
  LAB_CHECK(!v.defined() || v.shape() == node_->shape, InvalidArgument, "bind_value: shape ", shape_str(v.shape()),
            " for a parameter of shape ", shape_str(node_->shape));
  *value_ = std::move(v);
}

void Var::set_gradient_hook(std::function<void()> hook) const {
  LAB_CHECK(requires_grad(), InvalidArgument, "set_gradient_hook on a Var that does not require a gradient");
  node_->gradient_hook = std::move(hook);
}

int Var::pending_gradient_steps() const {
  return node_ ? node_->pending_gradient_steps : 0;
}

}  // namespace lab
