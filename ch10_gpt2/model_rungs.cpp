#include "ch10_gpt2/model_rungs.h"

#include "common/core/error.h"

namespace lab {

std::vector<std::string> activations_names() {
  return {"fp32", "16bit"};
}

ModelRungs ModelRungs::parse(const std::string& kernels, const std::string& attention, const std::string& recompute,
                             const std::string& activations, const std::string& lm_head, int64_t lm_head_rows) {
  LAB_CHECK(activations == "fp32" || activations == "16bit", InvalidArgument, "--activations: '", activations,
            "' is not one of fp32|16bit");
  const ModelRungs rungs{
      ch06::parse_kernels(kernels), ch09::parse_attention(attention), ch07::parse_recompute_policy(recompute),
      activations == "16bit",       ch07::parse_lm_head(lm_head),     lm_head_rows};
  ModelOptions checked;
  ch07::use_lm_head(checked, rungs.lm_head, lm_head_rows);  // a bad --lm-head-rows fails with the flags' parsing
  return rungs;
}

std::string ModelRungs::incompatibility() const {
  if (attention == ch09::Attention::Batched && ch07::is_selective(recompute))
    return cat("--recompute ", ch07::recompute_policy_name(recompute),
               " recomputes the core attention's probabilities, and --attention batched keeps its own (16-bit): use "
               "--recompute none or block with it, or --attention flash, which keeps none");
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
  ch07::use_lm_head(options, lm_head, lm_head_rows);
  options.activations = activations_16bit ? matmul : DType::F32;
}

std::string ModelRungs::str() const {
  return cat("--kernels ", ch06::kernels_name(kernels), " --attention ", ch09::attention_name(attention),
             " --recompute ", ch07::recompute_policy_name(recompute), activations_16bit ? " --activations 16bit" : "",
             lm_head == ch07::LmHead::Chunked ? " --lm-head chunked" : "",
             lm_head_rows > 0 ? cat(" --lm-head-rows ", lm_head_rows) : std::string());
}

std::vector<ModelRungs> every_model_rungs() {
  std::vector<ModelRungs> all;
  for (const ch06::Kernels k : {ch06::Kernels::Reference, ch06::Kernels::Fused})
    for (const ch09::Attention a : {ch09::Attention::Materialized, ch09::Attention::Batched, ch09::Attention::Flash,
                                    ch09::Attention::FlashOnePass})
      for (const ch07::RecomputePolicy r : ch07::recompute_policies())
        for (const ch07::LmHead h : {ch07::LmHead::Full, ch07::LmHead::Chunked}) {
          const bool odd_chunks = h == ch07::LmHead::Chunked && k == ch06::Kernels::Fused;
          all.push_back({k, a, r, false, h, odd_chunks ? 7 : 0});
        }
  return all;
}

}  // namespace lab
