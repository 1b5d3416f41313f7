// The choice of ZeRO stage, and the checks every stage makes (see zero_step.h).
#include "ch07_memory/zero/zero_step.h"

#include "ch07_memory/zero/stage1_optimizer_state.h"
#include "ch07_memory/zero/stage2_gradients.h"
#include "ch07_memory/zero/stage3_parameters.h"
#include "common/core/error.h"

namespace lab::ch07 {

std::unique_ptr<TrainStep> make_zero_step(int stage, comm::Communicator& group, const ZeroShards& shards,
                                          dist::DpStage dp_stage, GPT2& model, AdamW& optimizer, TrainStepConfig config,
                                          bool prefetch) {
  LAB_CHECK(!prefetch || stage == 3, InvalidArgument, "--zero-prefetch gathers stage 3's blocks ahead: it needs ",
            "--zero 3, not --zero ", stage);
  if (stage == 1) return std::make_unique<ZeroStage1Step>(group, shards, dp_stage, model, optimizer, config);
  if (stage == 2) return std::make_unique<ZeroStage2Step>(group, shards, model, optimizer, config);
  if (stage == 3) return std::make_unique<ZeroStage3Step>(group, shards, model, optimizer, config, prefetch);
  fail(ErrorKind::InvalidArgument, "--zero ", stage, ": the ZeRO stages are 1 (optimizer state), 2 (also ",
       "gradients) and 3 (also parameters)");
}

ZeroShards zero_shards(int stage, const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes) {
  return stage == 3 ? ZeroShards::per_block(params, ranks, rank) : ZeroShards(params, ranks, rank, bucket_bytes);
}

void check_sharding(const comm::Communicator& group, const ZeroShards& shards, const AdamW& optimizer) {
  LAB_CHECK(shards.ranks() == group.size() && shards.rank() == group.rank(), InvalidArgument, "ZeRO: shards of rank ",
            shards.rank(), " of ", shards.ranks(), " used on rank ", group.rank(), " of ", group.size());
  LAB_CHECK(optimizer.sharded() && optimizer.owned() == shards.owned(), InvalidArgument,
            "ZeRO: the optimizer must keep moments for this rank's shard only (AdamW built with shards.owned())");
}

}  // namespace lab::ch07
