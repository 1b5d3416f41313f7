// The book's case study as one staircase, gpt2_step_bench --staircase ch10: one GPT-2 training step walked up
// every speed rung the chapters teach, each one setting away from the rung below,
//
//     fp32 -> tf32 (GPU) -> bf16 mixed precision -> fused kernels (chapter 6) -> 16-bit activations
//       -> batched attention -> flash attention (chapter 9) -> CUDA graphs (GPU, chapter 9)
//       -> the largest batch that fits (chapter 7) -> accumulation to a 4x larger step (chapter 7)
//
// so that the ratio between two neighbours is what one technique bought, and the ratio to the first what all of
// them bought together. The memory column shows what 16-bit activations and flash attention free, which the
// "largest batch" rung spends on rows: the largest batch whose step's allocator peak fits the highest peak
// measured on the rungs below it (on a GPU the fp32 baseline's; on a CPU, where the 16-bit rungs add a weight
// copy and save little, a 16-bit rung's), searched with measured steps (gpt2_step_bench --batch-fits,
// ch07_memory/max_batch.h). The last rung accumulates 4 such micro-batches per step: the large global batch training
// wants, in the same memory (its tokens/s is the one to compare). On a CPU the GPU-only rungs are left out and most
// rungs cost time rather than save it (no 16-bit arithmetic, no tensor cores): the staircase is there to be run on a
// GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/lab/staircase.h"

namespace lab::ch10 {

// `base_flags`: the workload every rung shares (model, sequence length, steps), in gpt2_step_bench's flags;
// `batch`: the batch of every rung up to the largest-batch search; `on_gpu`: whether the GPU-only rungs apply.
staircase::Staircase book_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu);

}  // namespace lab::ch10
