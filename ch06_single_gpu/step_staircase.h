// The chapter's staircase for gpt2_step_bench --staircase ch06: the training step of one GPT-2, climbing one
// change at a time,
//
//     fp32  ->  tf32 (GPU only)  ->  bf16 mixed precision  ->  fused kernels (--kernels fused)  ->  twice the batch
//
// The rungs are written as data (the setting each rung changes), and the staircase is built from the ones that
// apply on the device: the CPU has no TF32, so there the bf16 rung follows fp32 directly. Every
// rung keeps the settings of the rungs below it (common/lab/staircase.h), so a ratio between neighbours
// measures exactly one change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/lab/staircase.h"

namespace lab::ch06 {

// `base_flags`: the workload every rung shares (model, sequence length, steps), in gpt2_step_bench's flags;
// `batch`: the batch of every rung but the last, which doubles it. `on_gpu`: whether the GPU-only rungs apply.
staircase::Staircase speed_staircase(const std::vector<std::string>& base_flags, int64_t batch, bool on_gpu);

}  // namespace lab::ch06
