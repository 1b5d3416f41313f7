#include "ch06_single_gpu/step_staircase.h"

namespace lab::ch06 {

staircase::Staircase speed_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu) {
  const std::vector<staircase::Change> changes = {
      {"fp32", "the baseline: the reference kernels, fp32 GEMMs", "--dtype", "fp32", false},
      {"tf32", "TF32 tensor cores for the fp32 GEMMs (10-bit mantissa products, fp32 sums)", "--dtype", "tf32", true},
      {"bf16",
       "bf16 matmul operands, fp32 accumulation and master weights: half the bytes per operand, bf16 tensor cores",
       "--dtype", "bf16", false},
      {"fused", "the chapter's kernels: residual + LayerNorm, GEMM + bias + GELU, online-softmax classifier",
       "--kernels", "fused", false},
      {"batch x2", "twice the batch: more rows per GEMM and per kernel launch", "--batch", std::to_string(2 * batch),
       false},
  };
  std::vector<std::string> base = base_flags;
  base.insert(base.end(), {"--batch", std::to_string(batch), "--kernels", "reference"});
  return staircase::cumulative_staircase("ch06", "one GPT-2 training step (forward, backward, AdamW)", base, changes,
                                         on_gpu);
}

}  // namespace lab::ch06
