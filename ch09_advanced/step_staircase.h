// The chapter's staircase for gpt2_step_bench --staircase ch09: the top of chapter 6's (bf16 mixed precision,
// fused kernels), then attention climbing one change at a time,
//
//     materialized attention  ->  batched (--attention batched)  ->  flash attention (--attention flash)
//       ->  CUDA graphs (--cuda-graphs, on a GPU only)
//
// Each ratio is one change: batched runs the same algorithm with 16-bit products on tensor cores and keeps the
// probabilities in 16 bits; flash no longer writes, keeps or reads back the probabilities at all (the memory
// column) and runs its products on tensor cores too (the time column, on a GPU); CUDA graphs replay the same
// kernels with one launch per step (the host's time to queue them goes: graphed_step.h). At short sequences on a
// CPU expect little or no gain in time from flash: the saving grows with T (attention_choice.h).
#pragma once

#include <string>
#include <vector>

#include "common/lab/staircase.h"

namespace lab::ch09 {

// `base_flags`: the workload every rung shares (model, batch, sequence length, steps), in gpt2_step_bench's flags;
// `gpu`: whether the device is a GPU (the CUDA graphs rung).
staircase::Staircase attention_staircase(const std::vector<std::string>& base_flags, bool gpu);

}  // namespace lab::ch09
