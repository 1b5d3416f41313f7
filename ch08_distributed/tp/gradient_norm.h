// The global gradient norm of a model split by tensor and pipeline parallelism, for clipping: the norm of the
// whole model's gradient, the same on every rank.
//
// Each rank sums the squares of the gradients it alone counts, and the sums are added over the tp group,
// then over the pp group:
//   - a parameter every tp rank holds whole (LayerNorms, the row-parallel biases, wpe) counts on tp rank 0
//     only, as its gradient is the same on every tp rank;
//   - the tied wte counts on the first pipeline stage only (the last stage's copy has the same gradient once
//     the stages have summed them: ch08_distributed/pp/tied_embedding.h).
// The data-parallel replicas hold the same averaged gradient, so the dp group needs nothing.
#pragma once

#include "common/comm/parallel_context.h"
#include "common/nn/gpt2.h"

namespace lab::ch08::tp {

// The sum of squared gradients of the whole model, as one f32 on the model's device (nothing is read back): each
// rank adds the squares of the gradients it counts (see above), parameter by parameter, and the sums are
// all-reduced over context.tp() and context.pp(). Collective over both groups.
Tensor model_parallel_sum_squares(const GPT2& model, const comm::ParallelContext& context);

}  // namespace lab::ch08::tp
