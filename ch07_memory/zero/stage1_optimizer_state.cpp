// ZeRO stage 1: the sharded update of whole averaged gradients (see stage1_optimizer_state.h).
#include "ch07_memory/zero/stage1_optimizer_state.h"

#include "ch07_memory/zero/parameter_gather.h"
#include "ch07_memory/zero/zero_step.h"

namespace lab::ch07 {

ZeroStage1Step::ZeroStage1Step(comm::Communicator& group, const ZeroShards& shards, dist::DpStage stage, GPT2& model,
                               AdamW& optimizer, TrainStepConfig config)
    : dist::DataParallelStep(group, stage, shards.bucket_bytes(), model, optimizer, config),
      group_(group),
      shards_(shards) {
  check_sharding(group, shards, optimizer);
}

void ZeroStage1Step::optimizer_step(double lr) {
  optimizer().step(static_cast<float>(lr), grad_scale());  // the owned ranges of the averaged gradients
  all_gather_parameters(group_, shards_, model().parameters());
}

}  // namespace lab::ch07
