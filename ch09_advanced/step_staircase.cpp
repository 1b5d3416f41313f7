#include "ch09_advanced/step_staircase.h"

namespace lab::ch09 {

staircase::Staircase attention_staircase(const std::vector<std::string>& base_flags, bool gpu) {
  staircase::Staircase stairs{
      "ch09", "one GPT-2 training step (forward, backward, AdamW), bf16 and fused kernels", base_flags, {}};
  stairs.base_flags.insert(stairs.base_flags.end(), {"--dtype", "bf16", "--kernels", "fused"});
  stairs.rungs.push_back({"materialized",
                          "the baseline: chapter 6's top rung, attention's T x T probabilities written and kept",
                          {"--attention", "materialized"}});
  stairs.rungs.push_back({"batched",
                          "the same algorithm in 16 bits: the attention products on tensor cores (cuBLASLt), one fused "
                          "softmax each way, the probabilities kept in 16 bits",
                          {"--attention", "batched"}});
  stairs.rungs.push_back({"flash",
                          "flash attention: tiles with an online softmax, one log-sum-exp per row kept instead of the "
                          "probabilities, which backward recomputes",
                          {"--attention", "flash"}});
  std::vector<std::string> graphs;
  if (gpu) {
    graphs = {"--cuda-graphs"};
    stairs.rungs.push_back({"cuda graphs",
                            "the same kernels, captured once in a CUDA graph and replayed: one launch per step",
                            {"--attention", "flash", "--cuda-graphs"}});
    stairs.rungs.push_back({"flash, tuned kernels",  // on the CPU it is flash itself
                            "flash attention's fastest kernel set on this GPU (64- or 128-row tiles, two strips of "
                            "rows a warp), timed at the first step: the same bits",
                            {"--attention", "flash-tuned", "--cuda-graphs"}});
  }
  std::vector<std::string> one_pass = {"--attention", "flash-one-pass"};
  one_pass.insert(one_pass.end(), graphs.begin(), graphs.end());
  stairs.rungs.push_back({"flash, one pass",
                          gpu ? "flash attention's backward in one pass over the key tiles, dQ added by f32 atomics: 5 "
                                "tile products a pair of tiles, not 7 (the last bits of dQ vary from run to run)"
                              : "flash attention's backward in one pass, one task per head summing dQ: 5 tile "
                                "products a pair of tiles, not 7, the same bits",
                          one_pass});
  return stairs;
}

}  // namespace lab::ch09
