#include "common/autograd/functions.h"

#include <functional>

#include "common/autograd/function_support.h"
#include "common/ops/attention.h"
#include "common/ops/batched_attention.h"
#include "common/ops/classifier.h"
#include "common/ops/convert.h"
#include "common/ops/embedding.h"
#include "common/ops/flash_attention.h"
#include "common/ops/gelu.h"
#include "common/ops/layernorm.h"
#include "common/ops/linear.h"
#include "common/ops/residual.h"

namespace lab::ag {

Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe) {
  return embedding(tape, tokens, wte, wpe, wte.value().dtype());
}

Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe, DType out_dtype) {
  const MemoryOpScope op("embedding");
  const int64_t C = wte.value().dim(1);
  Var out(empty_as({tokens.dim(0), tokens.dim(1), C}, out_dtype, wte.value().device(), MemCategory::Activations),
          tape.recording() && any_requires_grad({&wte, &wpe}));
  ops::embedding_forward(out.value(), tokens, wte.value(), wpe.value());
  if (out.requires_grad())
    tape.record("embedding", {},
                [wte, wpe, tokens, out = out.without_value()] {
                  const ParameterGradients position = parameter_gradients(wpe);
                  ops::embedding_backward(wte.grad(), position.weight, out.grad(), tokens, position.write);
                },
                {wte, wpe});
  return out;
}

Var linear(Tape& tape, const Var& x, const Var& w, const Var& b) {
  const MemoryOpScope op("linear");
  Shape shape = x.value().shape();
  shape.back() = w.value().dim(0);
  const Tensor bias = b.defined() ? b.value() : Tensor();
  Var out(new_activation(shape, x.value()), tape.recording() && any_requires_grad({&x, &w, &b}));
  ops::linear_forward(out.value(), x.value(), w.value(), bias);
  if (out.requires_grad())
    tape.record("linear", {x.value()},
                [x, w, b, out = out.without_value()] {
                  const GradientTarget dx = gradient_target(x);
                  const ParameterGradients dp = parameter_gradients(w, b);
                  ops::linear_backward(dx.grad, dp.weight, dp.bias, out.grad(), x.value(), w.value(), dx.write,
                                       dp.write);
                },
                {x, w, b});
  return out;
}

Var layernorm(Tape& tape, const Var& x, const Var& w, const Var& b) {
  const MemoryOpScope op("layernorm");
  const Tensor& xv = x.value();
  const int64_t rows = xv.numel() / xv.dim(-1);
  Var out(new_activation(xv.shape(), xv), tape.recording() && any_requires_grad({&x, &w, &b}));
  // The statistics stay f32 whatever the activations' dtype (ops/layernorm.h).
  Tensor mean, rstd;
  {
    MemoryScope scope(MemCategory::Activations);
    mean = Tensor::empty({rows}, DType::F32, xv.device());
    rstd = Tensor::empty({rows}, DType::F32, xv.device());
  }
  ops::layernorm_forward(out.value(), mean, rstd, xv, w.value(), b.value());
  if (out.requires_grad())
    tape.record("layernorm", {xv, mean, rstd},
                [x, w, b, mean, rstd, out = out.without_value()] {
                  const GradientTarget dx = gradient_target(x);
                  const ParameterGradients dp = parameter_gradients(w, b);
                  ops::layernorm_backward(dx.grad, dp.weight, dp.bias, out.grad(), x.value(), w.value(), mean, rstd,
                                          dx.write, dp.write);
                },
                {x, w, b});
  return out;
}

void recompute_layernorm_in_backward(Tape& tape, const Var& out, const Var& x, const Var& w, const Var& b) {
  const Tensor value = out.value();
  recompute_in_backward(tape, "layernorm (recomputed)", value, [value, x, w, b] {
    const int64_t rows = value.numel() / value.dim(-1);
    const Tensor mean = empty_as({rows}, DType::F32, value.device(), MemCategory::Workspace);
    const Tensor rstd = empty_as({rows}, DType::F32, value.device(), MemCategory::Workspace);
    ops::layernorm_forward(value, mean, rstd, x.value(), w.value(), b.value());
  });
}

Var gelu(Tape& tape, const Var& x) {
  const MemoryOpScope op("gelu");
  Var out(new_activation(x.value().shape(), x.value()), tape.recording() && x.requires_grad());
  ops::gelu_forward(out.value(), x.value());
  if (out.requires_grad())
    tape.record("gelu", {x.value()},
                [x, out = out.without_value()] {
                  const GradientTarget dx = gradient_target(x);
                  ops::gelu_backward(dx.grad, x.value(), out.grad(), dx.write);
                },
                {x});
  return out;
}

GradientPassThrough pass_gradient_through(const Tensor& g, const Var& a, const Var& b, BranchGradient branch) {
  GradientPassThrough plan;
  bool g_given = false;
  for (const Var* v : {&a, &b}) {
    if (!v->requires_grad()) continue;
    if (!v->grad_unallocated()) {
      plan.add_into[plan.adds++] = v->grad();
    } else if (!g_given || (v == &b && branch == BranchGradient::SharesStream)) {
      v->bind_grad(g);
      g_given = true;
    } else {
      plan.copy = empty_as(g.shape(), g.dtype(), g.device(), MemCategory::Activations);
      v->bind_grad(plan.copy);
    }
  }
  return plan;
}

void GradientPassThrough::add_remaining(const Tensor& g) const {
  // a == b leaves here with g bound to it and g added once more: 2g, as the sum's backward gives.
  if (adds > 0) ops::residual_backward(add_into[0], add_into[1], g);
}

namespace {

Var residual_add(Tape& tape, const Var& a, const Var& b, BranchGradient branch) {
  const MemoryOpScope op("residual");
  Var out(new_activation(a.value().shape(), a.value()), tape.recording() && any_requires_grad({&a, &b}));
  ops::residual_forward(out.value(), a.value(), b.value());
  if (out.requires_grad())
    tape.record("residual", {},
                [a = a.without_value(), b = b.without_value(), out = out.without_value(), branch] {
                  const Tensor& g = out.grad();
                  const GradientPassThrough plan = pass_gradient_through(g, a, b, branch);
                  if (plan.copy.defined()) ops::residual_gradient_copy(plan.copy, g);
                  plan.add_remaining(g);
                },
                {a, b});
  return out;
}

}  // namespace

Var residual(Tape& tape, const Var& a, const Var& b) {
  return residual_add(tape, a, b, BranchGradient::Copy);
}

Var residual_into_stream(Tape& tape, const Var& stream, const Var& branch) {
  return residual_add(tape, stream, branch, BranchGradient::SharesStream);
}

namespace {

// `t` in `storage`: itself when it has that dtype already, else a rounded copy charged to `category`.
Tensor in_storage(const Tensor& t, DType storage, MemCategory category) {
  if (t.dtype() == storage) return t;
  const Tensor copy = empty_as(t.shape(), storage, t.device(), category);
  ops::convert(copy, t);
  return copy;
}

// x's gradient += g, g of another dtype converted to the gradient's first (through a workspace copy). When g is x's
// first contribution (gradient_target), g is converted straight into a fresh gradient instead: no zero-fill, no
// copy, one kernel instead of two.
void add_converted_gradient(const Var& x, const Tensor& g) {
  const GradientTarget target = gradient_target(x);
  if (target.write == ops::GradWrite::Overwrite)
    ops::convert(target.grad, g);
  else
    ops::residual_backward(target.grad, Tensor(), in_storage(g, target.grad.dtype(), MemCategory::Workspace));
}

}  // namespace

void recompute_in_backward(Tape& tape, const char* op, const Tensor& value, std::function<void()> recompute) {
  if (!tape.recording()) return;
  value.storage()->release();
  tape.record(op, {}, [value, recompute = std::move(recompute)] {
    value.storage()->restore();
    recompute();
  });
}

void forward_in_storage(const Tensor& out, const Tensor& q, DType storage,
                        const std::function<void(const Tensor& out_s, const Tensor& q_s)>& forward) {
  if (storage == q.dtype()) {
    forward(out, q);
    return;
  }
  const Tensor out_s = empty_as(out.shape(), storage, q.device(), MemCategory::Activations);
  forward(out_s, in_storage(q, storage, MemCategory::Activations));
  ops::convert(out, out_s);
}

void backward_in_storage(const Var& qkv, const Var& out, DType storage, bool with_out,
                         const std::function<void(const Tensor& dqkv_s, ops::GradWrite write, const Tensor& q_s,
                                                  const Tensor& dout_s, const Tensor& out_s)>& backward) {
  const Tensor& x = qkv.value();
  if (storage == x.dtype()) {
    const GradientTarget dqkv = gradient_target(qkv);
    backward(dqkv.grad, dqkv.write, x, out.grad(), with_out ? out.value() : Tensor());
    return;
  }
  const MemCategory work = MemCategory::Workspace;
  Tensor dqkv_s;  // written whole by the backward, then converted into qkv's gradient
  {
    MemoryScope scope(work);
    dqkv_s = Tensor::empty(x.shape(), storage, x.device());
  }
  backward(dqkv_s, ops::GradWrite::Overwrite, in_storage(x, storage, work), in_storage(out.grad(), storage, work),
           with_out ? in_storage(out.value(), storage, work) : Tensor());
  add_converted_gradient(qkv, dqkv_s);
}

Var cast(Tape& tape, const Var& x, DType dtype) {
  if (x.value().dtype() == dtype) return x;
  const MemoryOpScope op("cast");
  Var out(empty_as(x.value().shape(), dtype, x.value().device(), MemCategory::Activations),
          tape.recording() && x.requires_grad());
  ops::convert(out.value(), x.value());
  if (out.requires_grad())
    tape.record("cast", {},
                [x = x.without_value(), out = out.without_value()] { add_converted_gradient(x, out.grad()); }, {x});
  return out;
}

Var attention(Tape& tape, const Var& qkv, int n_head) {
  const MemoryOpScope op("attention");
  const Tensor& q = qkv.value();
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2) / 3;
  Var out(new_activation({B, T, C}, q), tape.recording() && qkv.requires_grad());
  const Tensor att = empty_as({B, n_head, T, T}, DType::F32, q.device(), MemCategory::Activations);
  forward_in_storage(out.value(), q, DType::F32,
                     [&](const Tensor& out_s, const Tensor& q_s) { ops::attention_forward(out_s, att, q_s, n_head); });
  if (out.requires_grad())
    tape.record("attention", {q, att},
                [qkv, att, n_head, out = out.without_value()] {
                  backward_in_storage(
                      qkv, out, DType::F32, false,
                      [&](const Tensor& dqkv, ops::GradWrite write, const Tensor& x, const Tensor& dout,
                          const Tensor&) { ops::attention_backward(dqkv, dout, x, att, n_head, write); });
                },
                {qkv});
  return out;
}

Var flash_attention(Tape& tape, const Var& qkv, int n_head, DType storage, ops::FlashBackward passes,
                    ops::FlashTiles tiles) {
  const MemoryOpScope op("attention");
  const Tensor& q = qkv.value();
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2) / 3;
  Var out(new_activation({B, T, C}, q), tape.recording() && qkv.requires_grad());
  const Tensor lse = empty_as({B, n_head, T}, DType::F32, q.device(), MemCategory::Activations);
  forward_in_storage(out.value(), q, storage, [&](const Tensor& out_s, const Tensor& q_s) {
    ops::flash_attention_forward(out_s, lse, q_s, n_head, tiles);
  });
  if (out.requires_grad())
    tape.record(
        "flash attention", {q, out.value(), lse},
        [=] {
          backward_in_storage(
              qkv, out, storage, true,
              [&](const Tensor& dqkv, ops::GradWrite write, const Tensor& x, const Tensor& dout, const Tensor& o) {
                ops::flash_attention_backward(dqkv, dout, x, o, lse, n_head, write, passes, tiles);
              });
        },
        {qkv});
  return out;
}

Var batched_attention(Tape& tape, const Var& qkv, int n_head, DType storage) {
  const MemoryOpScope op("attention");
  const Tensor& q = qkv.value();
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2) / 3;
  Var out(new_activation({B, T, C}, q), tape.recording() && qkv.requires_grad());
  const Tensor probs = empty_as({B, n_head, T, T}, storage, q.device(), MemCategory::Activations);
  forward_in_storage(out.value(), q, storage, [&](const Tensor& out_s, const Tensor& q_s) {
    ops::batched_attention_forward(out_s, probs, q_s, n_head);
  });
  if (out.requires_grad())
    tape.record("batched attention", {q, probs},
                [qkv, probs, n_head, storage, out = out.without_value()] {
                  backward_in_storage(
                      qkv, out, storage, false,
                      [&](const Tensor& dqkv, ops::GradWrite write, const Tensor& x, const Tensor& dout,
                          const Tensor&) { ops::batched_attention_backward(dqkv, dout, x, probs, n_head, write); });
                },
                {qkv});
  return out;
}

Tensor cross_entropy(Tape& tape, const Var& logits, const Tensor& targets, int64_t vocab,
                     const ops::GradScale& grad_scale) {
  return cross_entropy_through(ops::fused_classifier, tape, logits, targets, vocab, grad_scale);
}

Tensor cross_entropy_through(ops::ClassifierFn classifier, Tape& tape, const Var& logits, const Tensor& targets,
                             int64_t vocab, const ops::GradScale& grad_scale) {
  const MemoryOpScope op("cross_entropy");
  const Tensor& lv = logits.value();
  const int64_t Vp = lv.dim(-1), N = lv.numel() / Vp;
  Tensor losses;
  {
    MemoryScope scope(MemCategory::Activations);
    losses = Tensor::empty({N}, DType::F32, lv.device());  // f32 whatever the logits' dtype
  }
  const bool with_grad = tape.recording() && logits.requires_grad();
  const ops::GradScale dloss = mean_loss_gradient(with_grad, grad_scale, N, "cross_entropy");
  classifier(lv.reshape({N, Vp}), losses, targets.reshape({N}), vocab, dloss);
  if (with_grad) bind_logits_as_gradient(tape, logits, lv);  // the logits buffer now holds dlogits
  return losses;
}

}  // namespace lab::ag
