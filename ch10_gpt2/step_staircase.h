// The book's case study as one staircase, gpt2_step_bench --staircase ch10: one GPT-2 training step walked up
// every speed rung the chapters teach, each one setting away from the rung below,
//
//     fp32 -> tf32 (GPU) -> bf16 mixed precision -> fused kernels (chapter 6) -> 16-bit activations
//       -> batched attention -> flash attention (chapter 9) -> CUDA graphs (GPU, chapter 9) -> twice the batch
//
// so that the ratio between two neighbours is what one technique bought, and the ratio to the first what all of
// them bought together. The memory column shows what 16-bit activations and flash attention free, which the last
// rung spends on a larger batch. On a CPU the GPU-only rungs are left out and most rungs cost time rather than
// save it (no 16-bit arithmetic, no tensor cores): the staircase is there to be run on a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/lab/staircase.h"

namespace lab::ch10 {

// `base_flags`: the workload every rung shares (model, sequence length, steps), in gpt2_step_bench's flags;
// `batch`: the batch of every rung but the last, which doubles it; `on_gpu`: whether the GPU-only rungs apply.
staircase::Staircase book_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu);

}  // namespace lab::ch10
