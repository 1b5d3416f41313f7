// Var: a tensor value together with its gradient, shared by handle.
//
// Parameters are Vars whose value and gradient are views into the model's flat buffers (bound up front).
// Activations are Vars whose gradient is allocated (zero-filled) the first time a backward step asks for it.
// Every backward op accumulates (+=) into grad(), so a value used twice simply receives both contributions. Two
// exceptions save the zero-filling where the first contribution can be written over a new buffer, both for an
// input whose gradient is not allocated yet (grad_unallocated), with the buffer bound by bind_grad: the residual
// add's backward (ag::residual) passes its output's gradient on unchanged, as that buffer itself or a copy; the
// linear layers', GELU's and LayerNorm's write their input's gradient over a new buffer (ag::gradient_target,
// ops::GradWrite).
//
// A Var's value and its gradient are held apart: without_value() gives a handle to the same gradient that does not
// keep the value alive. A backward step holds its output, and inputs whose values its backward does not read (the
// residual add's), by such handles, so a tensor no backward reads is freed as soon as the forward pass is done with
// it: the linear projections' outputs, which the residual add consumes, are not kept for backward. The tape holds
// the Vars it counts pending steps for the same way.
//
// A parameter's gradient lives from step to step in the model's flat buffer, which a training step on CUDA need not
// zero-fill (on the CPU it does: there a product with beta = 0 clears its output in a pass of its own, no cheaper
// than the one memset): it marks every parameter's gradient stale (mark_grad_stale,
// ParameterStore::start_new_gradients), and the first backward step of the step that contributes to it writes over
// it (ag::parameter_gradients: a weight gradient's GEMM with beta = 0, a bias's or LayerNorm's column sums stored
// rather than added); a later contribution adds. Whoever reads a stale gradient through grad() gets it zero-filled
// first, so every other consumer adds into zeros as before.
//
// A gradient hook tells whoever needs it that a Var's gradient is final for this backward pass: data
// parallelism starts all-reducing a bucket of gradients as soon as all of them are final, while backward goes
// on (chapter 8). The tape counts, for every Var, the recorded backward steps that will still add to its
// gradient (each step names the Vars it adds to: tape.h); when the last of them has run, the hook runs, on the
// thread running backward. A parameter used twice, such as GPT-2's wte (embedding and LM head), is final only
// after its second contribution.
#pragma once

#include <functional>
#include <memory>

#include "common/core/memory.h"
#include "common/core/tensor.h"

namespace lab {

class Var {
 public:
  Var() = default;
  // An activation or input. requires_grad=false means backward never computes its gradient.
  explicit Var(Tensor value, bool requires_grad = true);
  // A parameter whose gradient lives in a preallocated buffer (same shape and device as the value). Should the
  // buffer be released (bind_grad with an undefined tensor), the next backward allocates a new one, counted
  // as MemCategory::Grads.
  static Var parameter(Tensor value, Tensor grad);

  bool defined() const { return node_ != nullptr; }
  // The value; throws for a handle made by without_value().
  const Tensor& value() const;
  // The same Var (its gradient, its hook, its pending steps) without keeping the value alive: what a backward step
  // holds of a Var whose value it does not read. A parameter's handle keeps its value (parameters belong to the
  // model, and bind_value must reach every copy). value() of such a handle throws.
  Var without_value() const;
  bool requires_grad() const;
  // The gradient, allocated as zeros on first use (zero-filled if stale); throws if this Var does not require a
  // gradient.
  const Tensor& grad() const;
  // The gradient if requires_grad, else an undefined Tensor: what backward ops pass as "maybe skip".
  Tensor grad_or_none() const;
  // Makes `g` the gradient buffer (used by the fused classifier, which computes dlogits in place); an undefined
  // `g` releases it (a consumer done with a parameter's gradient: chapter 7's optimizer in backward). A bound
  // gradient belongs to the Var from then on: once its last contribution is in, the step that reads it may hand
  // the buffer on to an input (ag::residual), which then adds into it.
  void bind_grad(Tensor g) const;
  // True for an activation (not a parameter) that requires a gradient and has none allocated or bound yet: no
  // backward step has added to it.
  bool grad_unallocated() const;
  // A parameter's bound gradient holds an earlier step's values (see the top): the next contribution writes over it
  // (take_stale_grad) or, read through grad(), it is zero-filled first. bind_grad clears the mark. A parameter
  // without a bound gradient is left as it is (its next grad() allocates zeros).
  void mark_grad_stale() const;
  bool grad_stale() const;
  // The stale gradient, no longer marked: for a backward step that writes every element of it.
  const Tensor& take_stale_grad() const;
  // Binds a new, uninitialised gradient buffer of the value's shape, dtype and device (charged to `category`) and
  // returns it: for a backward step that writes every element of its input's first gradient (ag::gradient_target).
  Tensor bind_new_grad(MemCategory category) const;
  // Makes `v` a parameter's value (same shape), or releases it (undefined `v`): ZeRO stage 3 (chapter 7)
  // binds a block's gathered weights just before they are used and releases them after. Functions read a
  // parameter's value when they run, forward or backward, so a rebinding is seen by every copy of this Var.
  void bind_value(Tensor v) const;
  // The same Var: copies share one value and gradient.
  bool operator==(const Var& other) const { return node_ == other.node_; }

  // Runs `hook` whenever the tape has run the last recorded step that adds to this Var's gradient (see above);
  // an empty function removes it. Shared by every copy of this Var.
  void set_gradient_hook(std::function<void()> hook) const;
  // Recorded backward steps, on any tape, that will still add to this Var's gradient.
  int pending_gradient_steps() const;

 private:
  friend class Tape;  // counts the pending steps and runs the hook

  // The gradient side, shared by every handle; the value's shape, dtype and device are kept for the gradient.
  struct Node {
    Shape shape;
    DType dtype = DType::F32;
    Device device;
    mutable Tensor grad;
    bool requires_grad = true;
    bool parameter = false;
    bool grad_stale = false;
    int pending_gradient_steps = 0;
    std::function<void()> gradient_hook;
  };
  std::shared_ptr<Node> node_;
  // The value, shared by the handles that keep it (so that a parameter's bind_value reaches them all); null in a
  // handle made by without_value().
  std::shared_ptr<Tensor> value_;
};

}  // namespace lab
