// What every differentiable function needs, in the core (functions.h) and in the chapters' own (fused ops,
// tensor-parallel functions, recompute): outputs allocated as activation memory, and the test of whether a
// function must record its backward at all.
#pragma once

#include <functional>
#include <initializer_list>

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/ops/grad_scale.h"
#include "common/ops/grad_write.h"

namespace lab::ag {

// A new tensor with the given shape on the device (and of the dtype) of `like`, counted as activation memory:
// the category the memory report and snapshot charge a forward pass's outputs to.
inline Tensor new_activation(const Shape& shape, const Tensor& like) {
  MemoryScope scope(MemCategory::Activations);
  return Tensor::empty(shape, like.dtype(), like.device());
}

// A new tensor charged to `category`, whatever the caller's.
inline Tensor empty_as(const Shape& shape, DType dtype, Device device, MemCategory category) {
  MemoryScope scope(category);
  return Tensor::empty(shape, dtype, device);
}

// The gradient scale that a mean loss over `rows` rows hands its classifier, which writes each row's gradient
// scaled by it: grad_scale / rows when the loss records a backward (`with_grad`), else 0 (no gradient written).
// `op` names the function in the error a zero grad_scale with a backward gets.
inline ops::GradScale mean_loss_gradient(bool with_grad, const ops::GradScale& grad_scale, int64_t rows,
                                         const char* op) {
  LAB_CHECK(!with_grad || grad_scale.value != 0.0f, InvalidArgument, op, ": grad_scale must be non-zero");
  return with_grad ? grad_scale.divided_by(static_cast<float>(rows)) : ops::GradScale(0.0f);
}

// For a loss whose classifier wrote the logits' gradient over the logits (the fused classifiers): binds that buffer
// as `logits`' gradient, and records a step with nothing to run that names it, so that the tape lists the buffer
// among what it keeps (Tape::entries) while it waits for the LM head's backward.
inline void bind_logits_as_gradient(Tape& tape, const Var& logits, const Tensor& buffer) {
  logits.bind_grad(buffer);
  tape.record("cross_entropy", {buffer}, [] {});
}

// Where a backward step writes the gradient of its input `x`, and how (ops::GradWrite). While no step has added
// to x (x.grad_unallocated(): the first of x's consumers to run backward), a new buffer, not zero-filled, bound
// to x as its gradient, to be written over: the step must then write every element. Else x's gradient, to add
// to. An undefined tensor when x needs no gradient.
struct GradientTarget {
  Tensor grad;
  ops::GradWrite write = ops::GradWrite::Add;
};
inline GradientTarget gradient_target(const Var& x) {
  if (!x.requires_grad()) return {};
  if (!x.grad_unallocated()) return {x.grad(), ops::GradWrite::Add};
  return {x.bind_new_grad(MemCategory::Activations), ops::GradWrite::Overwrite};
}

// Where a backward step writes the gradients of a layer's parameters, a weight `w` and its bias `b` (either may be
// undefined or not require a gradient: its tensor is then undefined), and how. When every one of them is stale
// (Var::mark_grad_stale: no contribution yet this training step), their buffers, to be written over, every element:
// ops take one GradWrite for both. Else their gradients, to add to (a stale one among them zero-filled by grad()).
struct ParameterGradients {
  Tensor weight, bias;
  ops::GradWrite write = ops::GradWrite::Add;
};
inline ParameterGradients parameter_gradients(const Var& w, const Var& b = Var()) {
  const bool want_w = w.defined() && w.requires_grad(), want_b = b.defined() && b.requires_grad();
  if ((want_w || want_b) && (!want_w || w.grad_stale()) && (!want_b || b.grad_stale()))
    return {want_w ? w.take_stale_grad() : Tensor(), want_b ? b.take_stale_grad() : Tensor(),
            ops::GradWrite::Overwrite};
  return {want_w ? w.grad() : Tensor(), want_b ? b.grad() : Tensor(), ops::GradWrite::Add};
}

// How a residual add's backward hands g, its output's gradient, to its inputs a and b unchanged (ag::residual, and
// chapter 6's fused residual + LayerNorm). An input that already holds a gradient gets g added (add_remaining). One
// whose gradient starts here gets g as it is, without the zero-filled buffer that grad() would allocate for the add:
// the first such input takes g's own buffer (g is complete when the step runs, and no other step reads it), a second
// one a new buffer, `copy`, that the caller fills with g's values. In GPT-2 both inputs of every add are of that
// kind: the stream's other reader, the next LayerNorm, comes before the add in the forward, so its backward runs
// after the add's, and the branch's output has no other reader. The stream then takes g, the branch the copy: at
// B = 32, T = 1024 in bf16 an add's backward moves 100 MB (read g, write the copy) instead of 350 MB (zero-fill both
// gradients, read three tensors, write two).
//
// BranchGradient::SharesStream makes the copy unnecessary where the caller knows the order of the backward: the
// second input (the branch) takes g's buffer too. That is sound when the branch's output has no other reader and
// every later addition into the first input's gradient (the stream's other readers' backward) runs after the
// branch's backward has read g: the residual adds of a pre-LN block, whose stream's other reader (the LayerNorm at
// the start of the branch) comes before the branch in the forward. The add's backward then moves nothing.
enum class BranchGradient { Copy, SharesStream };
struct GradientPassThrough {
  Tensor copy;  // defined: bound as an input's gradient, to be written with g's values
  Tensor add_into[2];
  int adds = 0;
  void add_remaining(const Tensor& g) const;  // g added into the inputs that held a gradient already
};
GradientPassThrough pass_gradient_through(const Tensor& g, const Var& a, const Var& b,
                                          BranchGradient branch = BranchGradient::Copy);

// True when some defined Var of `vars` wants a gradient: only then does a function record its backward.
inline bool any_requires_grad(std::initializer_list<const Var*> vars) {
  for (const Var* v : vars)
    if (v->defined() && v->requires_grad()) return true;
  return false;
}

// Activation recompute of a tensor computed in forward: call it once every forward step that reads `value` has
// been recorded. The value's memory is released now (Storage::release), and a step recorded here takes it again
// and runs `recompute` to fill it. The tape runs steps newest first, so the value is back just before the
// backward of those readers, and nothing is kept for it in between. `recompute` must give the value the readers
// saw in forward (the same kernel on the same kept inputs gives the same bits), and only those readers may read
// it. A tape that does not record is left alone (the value is freed with its last reader).
void recompute_in_backward(Tape& tape, const char* op, const Tensor& value, std::function<void()> recompute);

// For an op on qkv [B, T, 3C] that computes in one dtype whatever the activations' (the attention functions):
// runs forward(out_s, q_s) with qkv and the output in `storage`, on them directly when qkv has that dtype, else on
// rounded copies that live for the call, the output widened back into `out`.
void forward_in_storage(const Tensor& out, const Tensor& q, DType storage,
                        const std::function<void(const Tensor& out_s, const Tensor& q_s)>& forward);
// Its backward: runs backward(dqkv_s, write, q_s, dout_s, out_s) in `storage` (out_s only when `with_out`), which
// must write dqkv_s as `write` says (ops::GradWrite: add into it, or write every element without reading it). When
// qkv has that dtype, dqkv_s is qkv's gradient: written over a fresh buffer as its first contribution
// (gradient_target; attention is qkv's only consumer), added into otherwise. Else dqkv_s is a workspace in
// `storage`, written, then converted into qkv's gradient (or added, converted, into an earlier one). No zero-fill
// either way.
void backward_in_storage(const Var& qkv, const Var& out, DType storage, bool with_out,
                         const std::function<void(const Tensor& dqkv_s, ops::GradWrite write, const Tensor& q_s,
                                                  const Tensor& dout_s, const Tensor& out_s)>& backward);

}  // namespace lab::ag
