// The recompute policies (see recompute.h). Each hook mirrors the plain functions of common/autograd exactly,
// op for op, so that what backward computes is bitwise what it computes without recompute: a dropped tensor is
// recomputed by the same kernel from the same inputs, and every gradient receives the same additions in the
// same order.
#include "ch07_memory/recompute.h"

#include "common/autograd/function_support.h"
#include "common/core/error.h"
#include "common/ops/attention.h"
#include "common/ops/gelu.h"
#include "common/ops/linear.h"

namespace lab::ch07 {

namespace {

using ag::new_activation;

// Every parameter of a block, for the tape step that adds to all their gradients.
std::vector<Var> block_parameters(const Block& b) {
  return {b.ln_1.weight,        b.ln_1.bias,        b.attn.c_attn.weight, b.attn.c_attn.bias,
          b.attn.c_proj.weight, b.attn.c_proj.bias, b.ln_2.weight,        b.ln_2.bias,
          b.mlp.c_fc.weight,    b.mlp.c_fc.bias,    b.mlp.c_proj.weight,  b.mlp.c_proj.bias};
}

// gelu(h) @ w^T + b, keeping h but not gelu(h): backward computes gelu(h) again for w's gradient.
Var gelu_linear_recomputing_gelu(Tape& tape, const Var& h, const Var& w, const Var& b) {
  const MemoryOpScope op("gelu+linear");
  Shape shape = h.value().shape();
  shape.back() = w.value().dim(0);
  const Tensor bias = b.defined() ? b.value() : Tensor();
  const bool needs_grad = h.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad());
  Var out(new_activation(shape, h.value()), tape.recording() && needs_grad);
  {
    const Tensor gelu_out = new_activation(h.value().shape(), h.value());  // freed at the end of this scope
    ops::gelu_forward(gelu_out, h.value());
    ops::linear_forward(out.value(), gelu_out, w.value(), bias);
  }
  if (out.requires_grad())
    tape.record("gelu+linear (gelu recomputed)", {h.value(), out.value()},
                [=] {
                  Tensor gelu_out = new_activation(h.value().shape(), h.value());
                  ops::gelu_forward(gelu_out, h.value());
                  // The gradient of the GELU output starts at zero, as a Var's gradient does on the plain tape.
                  Tensor dgelu;
                  {
                    MemoryScope scope(MemCategory::Activations);
                    dgelu = Tensor::zeros(h.value().shape(), h.value().dtype(), h.value().device());
                  }
                  ops::linear_backward(dgelu, w.grad_or_none(), b.defined() ? b.grad_or_none() : Tensor(), out.grad(),
                                       gelu_out, w.value());
                  gelu_out = Tensor();  // not needed by the GELU's backward
                  if (h.requires_grad()) ops::gelu_backward(h.grad(), h.value(), dgelu);
                },
                {h, w, b});
  return out;
}

}  // namespace

std::vector<std::string> recompute_policy_names() {
  return {"none", "selective", "block"};
}

RecomputePolicy parse_recompute_policy(const std::string& name) {
  if (name == "none") return RecomputePolicy::None;
  if (name == "selective") return RecomputePolicy::Selective;
  if (name == "block") return RecomputePolicy::Block;
  fail(ErrorKind::InvalidArgument, "recompute policy '", name, "' is not one of none|selective|block");
}

const char* recompute_policy_name(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::None: return "none";
    case RecomputePolicy::Selective: return "selective";
    case RecomputePolicy::Block: return "block";
  }
  return "?";
}

namespace {

bool is_core_attention(const ModelOptions::AttentionFn& attention) {
  using Plain = Var (*)(Tape&, const Var&, int);
  const Plain* fn = attention.target<Plain>();
  return fn != nullptr && *fn == &ag::attention;
}

}  // namespace

void apply_recompute(ModelOptions& options, RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::None: return;
    case RecomputePolicy::Selective:
      LAB_CHECK(!options.tensor_parallel, InvalidArgument,
                "--recompute selective replaces the MLP, which a tensor-parallel shard cannot do (use --recompute "
                "block with --tp)");
      LAB_CHECK(!options.mlp, InvalidArgument, "--recompute selective: the model already has an MLP of its own");
      // Only the core's attention keeps probabilities to drop: another one (flash attention, chapter 9, which
      // keeps one number per row) stays as installed.
      if (is_core_attention(options.attention)) options.attention = attention_recomputing_probabilities;
      options.mlp = mlp_recomputing_gelu;
      return;
    case RecomputePolicy::Block: {
      // A decorator: the block recomputed is whichever was installed (chapter 6's fused one), or the standard one.
      ModelOptions::BlockFn installed = options.block;
      options.block = [installed](Tape& tape, const Block& block, const Var& x, const ModelOptions& o) {
        return block_recomputed(tape, block, x, o, installed);
      };
      return;
    }
  }
}

Var attention_recomputing_probabilities(Tape& tape, const Var& qkv, int n_head) {
  const MemoryOpScope op("attention");
  const Tensor& q = qkv.value();
  const int64_t B = q.dim(0), T = q.dim(1), C = q.dim(2) / 3;
  Var out(new_activation({B, T, C}, q), tape.recording() && qkv.requires_grad());
  {
    const Tensor att = new_activation({B, n_head, T, T}, q);  // freed at the end of this scope
    ops::attention_forward(out.value(), att, q, n_head);
  }
  if (out.requires_grad())
    tape.record("attention (probabilities recomputed)", {q, out.value()},
                [=] {
                  // The op computes the output with the probabilities; the output computed again is thrown away.
                  const Tensor att = new_activation({B, n_head, T, T}, q);
                  ops::attention_forward(new_activation({B, T, C}, q), att, q, n_head);
                  ops::attention_backward(qkv.grad(), out.grad(), q, att, n_head);
                },
                {qkv});
  return out;
}

Var mlp_recomputing_gelu(Tape& tape, const MLP& mlp, const Var& x) {
  return gelu_linear_recomputing_gelu(tape, mlp.c_fc.forward(tape, x), mlp.c_proj.weight, mlp.c_proj.bias);
}

Var block_recomputed(Tape& tape, const Block& block, const Var& x, const ModelOptions& options,
                     const ModelOptions::BlockFn& recomputed) {
  const MemoryOpScope op("block");
  ModelOptions inner = options;
  inner.block = nullptr;  // inside, the block computed once (with the other hooks), not recomputed again
  const auto run_block = [=](Tape& t, const Var& input) {
    return recomputed ? recomputed(t, block, input, inner) : block_forward(t, block, input, inner);
  };
  Tensor y;
  {
    Tape forward_only(false);  // records nothing: each activation is freed after its last use
    y = run_block(forward_only, x).value();
  }
  Var out(y, tape.recording());
  if (!out.requires_grad()) return out;
  std::vector<Var> adds_to = block_parameters(block);
  adds_to.push_back(x);
  tape.record(
      "block (recomputed)", {x.value(), out.value()},
      [=] {
        // The block's forward again, recorded this time, from the kept input; its backward then adds to the
        // gradients of the input (bound to x's) and of the parameters, starting from the output's gradient.
        Tape recorded;
        const Var x_again(x.value(), x.requires_grad());
        if (x.requires_grad()) x_again.bind_grad(x.grad());
        const Var y_again = run_block(recorded, x_again);
        y_again.bind_grad(out.grad());
        recorded.backward();
      },
      adds_to);
  return out;
}

}  // namespace lab::ch07
