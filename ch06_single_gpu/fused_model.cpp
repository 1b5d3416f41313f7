#include "ch06_single_gpu/fused_model.h"

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/fused_functions.h"

namespace lab::ch06 {

namespace {

// The core's block with two fusions: the residual add and ln_2 as one op, and the MLP as one op. Under LayerNorm
// recompute, ln_2's output comes back in backward from the sum by the core's LayerNorm: with 16-bit activations
// that is the fused op's forward bit for bit (fused_residual_layernorm.h); in f32 the fused op is a kernel of its
// own, whose bits are promised to rounding only.
Var fused_block(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var attn = attention_from_qkv(tape, block.attn, attention_qkv(tape, block, x, options), options);
  const ResidualNorm h = residual_layernorm(tape, x, attn, block.ln_2);
  const Var mlp = fused_mlp(tape, block.mlp, h.normalized, options);
  if (options.recompute_layernorm)
    ag::recompute_layernorm_in_backward(tape, h.normalized, h.residual, block.ln_2.weight, block.ln_2.bias);
  return ag::residual_into_stream(tape, h.residual, mlp);
}

}  // namespace

Kernels parse_kernels(const std::string& name) {
  if (name == "reference") return Kernels::Reference;
  if (name == "fused") return Kernels::Fused;
  fail(ErrorKind::InvalidArgument, "unknown kernels '", name, "' (choose reference or fused)");
}

const char* kernels_name(Kernels kernels) {
  return kernels == Kernels::Fused ? "fused" : "reference";
}

ModelOptions with_kernels(ModelOptions options, Kernels kernels) {
  if (kernels == Kernels::Reference) return options;
  LAB_CHECK(!options.tensor_parallel, InvalidArgument,
            "--kernels fused runs on one tensor-parallel rank only (use --kernels reference with --tp)");
  options.block = fused_block;
  options.mlp = fused_mlp;
  options.classifier = fused_classifier;
  return options;
}

void use_kernels(GPT2& model, Kernels kernels) {
  model.options() = with_kernels(model.options(), kernels);
}

}  // namespace lab::ch06
