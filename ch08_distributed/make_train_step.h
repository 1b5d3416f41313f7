// Which training step trains a given parallel layout: the one place the trainer (ch10_gpt2) asks for it.
//
//   layout              step                                        status
//   dp 1 x tp 1 x pp 1  TrainStep (common/train)                    one process
//   dp D                DataParallelStep (common/dist), --dp-stage  gradients averaged over the dp group
//   tp T                TensorParallelStep (tp/)                    the norm over the tp group
//   pp P                PipelineStep (pp/), --pp-schedule           the schedule over --micro-batches
//
// How they compose (Megatron's layout, common/comm/parallel_context.h: each rank belongs to one group of
// each dimension):
//   dp x tp  the model is tp-sharded (each rank builds its shard: ModelShard, common/nn/shard.h) and the
//            tp-sharded gradients are averaged over the dp group exactly as whole ones are: a tp step derives
//            from DataParallelStep and changes gradient_norm() (the sum of squares over the tp group, the
//            replicated parameters counted once).
//   dp x pp  the pipeline step replaces run_micro_batches() with its schedule and averages each stage's
//            gradients over its dp group after the schedule (a GradientReducer, common/dist/gradient_reducer.h; the
//            overlapped stage listens during the last micro-batch's backward).
//   tp x pp  each pipeline stage is tp-sharded; the schedule's transfers run between stages of the same
//            tp rank.
// Every combination is the single-process step on the same global batch (tests/ch08_distributed).
#pragma once

#include <memory>

#include "ch08_distributed/parallel_options.h"
#include "common/comm/parallel_context.h"
#include "common/train/train_step.h"

namespace lab::ch08 {

// The step for the context's layout, over `model` (this rank's part of it) and `optimizer`. Collective over
// the context's groups. Unsupported for a layout whose parallelism is not implemented.
std::unique_ptr<TrainStep> make_train_step(const comm::ParallelContext& context, const ParallelOptions& options,
                                           GPT2& model, AdamW& optimizer, TrainStepConfig config);

}  // namespace lab::ch08
