#include "ch10_gpt2/step_staircase.h"

namespace lab::ch10 {

staircase::Staircase book_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu) {
  const std::vector<staircase::Change> changes = {
      {"fp32", "the baseline: fp32 everywhere, the core's kernels, materialised attention", "--dtype", "fp32", false},
      {"tf32", "TF32 tensor cores for the fp32 GEMMs (chapter 6)", "--dtype", "tf32", true},
      {"bf16", "bf16 matmul operands with fp32 accumulation and master weights (chapter 6)", "--dtype", "bf16", false},
      {"fused", "fused residual + LayerNorm, GEMM + bias + GELU and classifier (chapter 6)", "--kernels", "fused",
       false},
      {"16-bit activations",
       "the activations between the ops in bf16 too: half their bytes, no conversion around each matmul",
       "--activations", "16bit", false},
      {"batched attention", "attention's products on tensor cores, its probabilities in 16 bits (chapter 9)",
       "--attention", "batched", false},
      {"flash attention", "no T x T matrices in memory: tiles with an online softmax (chapter 9)", "--attention",
       "flash", false},
      {"tuned flash kernels",
       "flash attention's fastest kernel set on this GPU, 64- or 128-row tiles, timed at the first step: the same "
       "bits (chapter 9)",
       "--attention", "flash-tuned", true},
      {"cuda graphs", "the whole step captured once and replayed: one launch per step (chapter 9)", "--cuda-graphs", "",
       true},
      {"largest batch",
       "the largest batch whose step fits the highest peak of the rungs below: the memory the rungs freed, spent "
       "on rows",
       "--batch-fits", "earlier-rungs", false},
      {"accumulation",
       "4 micro-batches of that batch per step, gradients accumulated: a 4x larger global batch "
       "in the same memory",
       "--accumulate", "4", false},
  };
  std::vector<std::string> base = base_flags;
  base.insert(base.end(), {"--batch", std::to_string(batch), "--kernels", "reference", "--attention", "materialized",
                           "--activations", "fp32"});
  return staircase::cumulative_staircase(
      "ch10", "one GPT-2 training step (forward, backward, AdamW), every rung of the book", base, changes, on_gpu);
}

}  // namespace lab::ch10
