#include "ch10_gpt2/model_rungs.h"

#include "common/core/error.h"

namespace lab {

std::vector<std::string> activations_names() {
  return {"fp32", "16bit"};
}

ModelRungs ModelRungs::parse(const std::string& kernels, const std::string& attention, const std::string& recompute,
                             const std::string& activations) {
  LAB_CHECK(activations == "fp32" || activations == "16bit", InvalidArgument, "--activations: '", activations,
            "' is not one of fp32|16bit");
  return {ch06::parse_kernels(kernels), ch09::parse_attention(attention), ch07::parse_recompute_policy(recompute),
          activations == "16bit"};
}

std::string ModelRungs::incompatibility() const {
  if (kernels == ch06::Kernels::Fused && recompute == ch07::RecomputePolicy::Selective)
    return "--recompute selective recomputes the GELU of the core's MLP, and --kernels fused replaces that MLP with "
           "its fused GEMM + bias + GELU: use --recompute block with --kernels fused";
  if (attention == ch09::Attention::Batched && recompute == ch07::RecomputePolicy::Selective)
    return "--recompute selective recomputes the core attention's probabilities, and --attention batched keeps its "
           "own (16-bit): use --recompute none or block with it, or --attention flash, which keeps none";
  if (activations_16bit && recompute == ch07::RecomputePolicy::Selective)
    return "--recompute selective recomputes fp32 attention probabilities and GELU outputs, and --activations 16bit "
           "keeps the activations in 16 bits: use --recompute block with it";
  return "";
}

std::string ModelRungs::refusal(DType matmul) const {
  if (std::string why = incompatibility(); !why.empty()) return why;
  if (activations_16bit && matmul == DType::F32)
    return "--activations 16bit needs 16-bit matmuls: --dtype bf16 or fp16";
  return "";
}

void ModelRungs::apply(ModelOptions& options, DType matmul) const {
  const std::string why = refusal(matmul);
  LAB_CHECK(why.empty(), InvalidArgument, why);
  options = ch06::with_kernels(options, kernels);
  ch09::use_attention(options, attention, matmul);
  ch07::apply_recompute(options, recompute);
  options.activations = activations_16bit ? matmul : DType::F32;
}

std::string ModelRungs::str() const {
  return cat("--kernels ", ch06::kernels_name(kernels), " --attention ", ch09::attention_name(attention),
             " --recompute ", ch07::recompute_policy_name(recompute), activations_16bit ? " --activations 16bit" : "");
}

std::vector<ModelRungs> every_model_rungs() {
  std::vector<ModelRungs> all;
  for (const ch06::Kernels k : {ch06::Kernels::Reference, ch06::Kernels::Fused})
    for (const ch09::Attention a : {ch09::Attention::Materialized, ch09::Attention::Batched, ch09::Attention::Flash})
      for (const ch07::RecomputePolicy r :
           {ch07::RecomputePolicy::None, ch07::RecomputePolicy::Selective, ch07::RecomputePolicy::Block})
        all.push_back({k, a, r});
  return all;
}

}  // namespace lab
