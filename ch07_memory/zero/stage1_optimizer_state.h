// ZeRO stage 1 (`--zero 1`): the optimizer state is sharded over the data-parallel ranks.
//
// What changes from data parallelism (common/dist/data_parallel_step.h): only the optimizer step. The
// gradients are averaged over the group exactly as there (the --dp-stage reducer: every rank holds the whole
// averaged gradient, so the norm and clipping are unchanged), but each rank's AdamW keeps moments for its shard
// only (shards.h: about 1/D of the buffer) and updates only the shard's parameters; an all-gather of the
// parameters then gives every rank the whole updated model (parameter_gather.h).
//
// Per-rank bytes with fp32 AdamW, Ψ parameters and D ranks: 4Ψ parameters + 4Ψ gradients + 8Ψ/D moments,
// instead of 16Ψ (the ZeRO paper's 16Ψ counts mixed precision's 2 + 2 + 12 bytes; stage 1 divides its 12 by D).
// What it costs: an all-gather of the parameters after every step, beside the gradients' all-reduce (as much
// traffic again as the reduce-scatter half of that all-reduce).
#pragma once

#include "ch07_memory/zero/shards.h"
#include "common/dist/data_parallel_step.h"

namespace lab::ch07 {

class ZeroStage1Step : public dist::DataParallelStep {
 public:
  // `optimizer` must be sharded as `shards` says (AdamW built with shards.owned()), `group` the shards' ranks.
  ZeroStage1Step(comm::Communicator& group, const ZeroShards& shards, dist::DpStage stage, GPT2& model,
                 AdamW& optimizer, TrainStepConfig config);

 protected:
  void optimizer_step(double lr) override;

 private:
  comm::Communicator& group_;
  ZeroShards shards_;
};

}  // namespace lab::ch07
