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

}  // namespace

std::vector<RecomputePolicy> recompute_policies() {
  return {RecomputePolicy::None, RecomputePolicy::Selective, RecomputePolicy::SelectiveLayerNorm,
          RecomputePolicy::Block};
}

std::vector<std::string> recompute_policy_names() {
  std::vector<std::string> names;
  for (const RecomputePolicy policy : recompute_policies()) names.emplace_back(recompute_policy_name(policy));
  return names;
}

RecomputePolicy parse_recompute_policy(const std::string& name) {
  std::string choices;
  for (const RecomputePolicy policy : recompute_policies()) {
    if (name == recompute_policy_name(policy)) return policy;
    if (!choices.empty()) choices += '|';
    choices += recompute_policy_name(policy);
  }
  fail(ErrorKind::InvalidArgument, "recompute policy '", name, "' is not one of ", choices);
}

bool is_selective(RecomputePolicy policy) {
  return policy == RecomputePolicy::Selective || policy == RecomputePolicy::SelectiveLayerNorm;
}

const char* recompute_policy_name(RecomputePolicy policy) {
  switch (policy) {
    case RecomputePolicy::None: return "none";
    case RecomputePolicy::Selective: return "selective";
    case RecomputePolicy::SelectiveLayerNorm: return "selective-ln";
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
    case RecomputePolicy::SelectiveLayerNorm:
      LAB_CHECK(!options.tensor_parallel, InvalidArgument, "--recompute ", recompute_policy_name(policy),
                " replaces the MLP, which a tensor-parallel shard cannot do (use --recompute block with --tp)");
      // Only the core's attention keeps probabilities to drop: another one (flash attention, chapter 9, which
      // keeps one number per row) stays as installed. The MLP installed, the core's or chapter 6's fused one,
      // drops its GELU output itself.
      if (is_core_attention(options.attention)) options.attention = attention_recomputing_probabilities;
      options.recompute_gelu = true;
      options.recompute_layernorm = policy == RecomputePolicy::SelectiveLayerNorm;
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
  // As ag::attention: fp32 inside, on widened copies when the activations are 16-bit.
  const auto f32_activation = [device = q.device()](const Shape& shape) {
    return ag::empty_as(shape, DType::F32, device, MemCategory::Activations);
  };
  Var out(new_activation({B, T, C}, q), tape.recording() && qkv.requires_grad());
  ag::forward_in_storage(out.value(), q, DType::F32, [&](const Tensor& out_s, const Tensor& q_s) {
    ops::attention_forward(out_s, f32_activation({B, n_head, T, T}), q_s, n_head);  // probabilities freed after
  });
  if (out.requires_grad())
    tape.record("attention (probabilities recomputed)", {q},
                [qkv, B, T, C, n_head, f32_activation, out = out.without_value()] {
                  ag::backward_in_storage(qkv, out, DType::F32, false,
                                          [&](const Tensor& dqkv, ops::GradWrite write, const Tensor& x,
                                              const Tensor& dout, const Tensor&) {
                                            // The op computes the output with the probabilities; the output computed
                                            // again is dropped.
                                            const Tensor att = f32_activation({B, n_head, T, T});
                                            ops::attention_forward(f32_activation({B, T, C}), att, x, n_head);
                                            ops::attention_backward(dqkv, dout, x, att, n_head, write);
                                          });
                },
                {qkv});
  return out;
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
      "block (recomputed)", {x.value()},
      [x, run_block, out = out.without_value()] {
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
