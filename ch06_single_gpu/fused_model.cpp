#include "ch06_single_gpu/fused_model.h"

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/fused_functions.h"

namespace lab::ch06 {

namespace {

Var fused_block(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var attn = attention_forward(tape, block.attn, block.ln_1.forward(tape, x), options);
  const ResidualNorm h = residual_layernorm(tape, x, attn, block.ln_2);
  return ag::residual(tape, h.residual, fused_mlp(tape, block.mlp, h.normalized, options));
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
