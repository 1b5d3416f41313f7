// The chapter's staircase for gpt2_step_bench --staircase ch09: the top of chapter 6's (bf16 mixed precision,
// fused kernels), then attention climbing one change at a time,
//
//     materialized attention  ->  flash attention (--attention flash)
//
// The ratio between the two rungs is flash attention's alone: the same model, batch and precision, the
// probabilities no longer written, kept or read back (the memory column), and on a GPU the attention products on
// tensor cores (the time column). At short sequences on a CPU expect little or no gain in time: the saving grows
// with T (attention_choice.h).
#pragma once

#include <string>
#include <vector>

#include "common/lab/staircase.h"

namespace lab::ch09 {

// `base_flags`: the workload every rung shares (model, batch, sequence length, steps), in gpt2_step_bench's flags.
staircase::Staircase attention_staircase(const std::vector<std::string>& base_flags);

}  // namespace lab::ch09
