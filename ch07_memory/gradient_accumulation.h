// Rung 1 of the memory staircase: gradient accumulation (`gpt2_train --total-batch-tokens`).
//
// What changes from the previous rung (the original step, one batch of B rows): the same B rows go through
// forward and backward in k micro-batches of B/k rows, each backward adding 1/k of its gradient to the one
// gradient buffer, and the optimizer steps once. The update is the large batch's (the gradient of a mean is
// the mean of the micro-batches' gradients; only the grouping of float sums differs), while activations, which
// grow with the rows in flight, shrink k times. The cost: k smaller GEMMs run less efficiently than one large
// one, and k passes over the weights instead of one. When not to use it: when the batch already fits, or when
// a small micro-batch starves the device (a GPU wants thousands of rows per GEMM).
//
// The step itself is common/train's (TrainStepConfig::accum_steps); this is the arithmetic of the setting.
#pragma once

#include <cstdint>

namespace lab::ch07 {

// Micro-batches per optimizer step on each of `ranks` data-parallel ranks: total_batch_tokens / (micro_batch_rows x
// seq x ranks), or 1 when total_batch_tokens is 0. InvalidArgument, naming the flags, when it is not a whole
// multiple.
int64_t micro_batches_per_step(int64_t total_batch_tokens, int64_t micro_batch_rows, int64_t seq, int64_t ranks = 1);

}  // namespace lab::ch07
