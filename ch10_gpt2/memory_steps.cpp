// The optimizer and step of chapter 7's memory rungs composed with chapter 8's layouts (see memory_steps.h).
#include "ch10_gpt2/memory_steps.h"

#include "ch07_memory/offload_optimizer.h"
#include "ch07_memory/optimizer_in_backward.h"
#include "ch07_memory/zero/parameter_gather.h"
#include "ch07_memory/zero/stage3_parameters.h"
#include "ch07_memory/zero/zero_step.h"
#include "ch08_distributed/make_train_step.h"
#include "common/core/error.h"

namespace lab {

std::string memory_steps_refusal(const MemoryStepOptions& options, const comm::ParallelLayout& layout) {
  if (options.zero < 0 || options.zero > 3)
    return cat("--zero ", options.zero,
               ": the stages are 1 (optimizer state), 2 (also gradients) and 3 (also parameters), 0 for none");
  if (options.zero_prefetch && options.zero != 3)
    return cat("--zero-prefetch gathers stage 3's blocks ahead: it needs --zero 3, not --zero ", options.zero);
  if (options.zero > 0 && (layout.tp != 1 || layout.pp != 1))
    return cat("--zero ", options.zero, " shards over data-parallel ranks only; it is not combined with --tp or --pp (",
               "layout ", layout.str(), ")");
  if (options.zero > 0 && options.optimizer_in_backward)
    return "--zero and --optimizer-in-backward exclude each other: ZeRO updates each shard after its gradients are "
           "reduced across the ranks";
  if (options.offload_optimizer && options.zero > 0)
    return "--offload optimizer and --zero exclude each other here: ZeRO shards the optimizer state across GPUs, "
           "offload moves the whole state to the host";
  if (options.offload_optimizer && options.optimizer_in_backward)
    return "--offload optimizer and --optimizer-in-backward exclude each other: the offloaded update runs on the "
           "CPU once the step's gradients are all copied down";
  if (options.optimizer_in_backward && (layout.dp != 1 || layout.tp != 1 || layout.pp != 1))
    return cat("--optimizer-in-backward runs in one process only (layout ", layout.str(),
               "): across ranks every gradient must be reduced before its update");
  return "";
}

void check_memory_steps(const MemoryStepOptions& options, const comm::ParallelLayout& layout) {
  const std::string why = memory_steps_refusal(options, layout);
  LAB_CHECK(why.empty(), InvalidArgument, why);
}

std::unique_ptr<AdamW> make_optimizer(const MemoryStepOptions& options, const comm::ParallelContext& context,
                                      const ch08::ParallelOptions& parallel, GPT2& model, const AdamWConfig& config) {
  check_memory_steps(options, context.layout());
  if (options.offload_optimizer) return ch07::make_offloaded_optimizer(model, config);
  if (options.zero == 0) return std::make_unique<AdamW>(model.parameters(), config);
  const ch07::ZeroShards shards = ch07::zero_shards(options.zero, model.parameters(), context.dp().size(),
                                                    context.dp().rank(), parallel.bucket_bytes);
  return std::make_unique<AdamW>(model.parameters(), config, shards.owned());
}

std::unique_ptr<TrainStep> make_step(const MemoryStepOptions& options, const comm::ParallelContext& context,
                                     const ch08::ParallelOptions& parallel, GPT2& model, AdamW& optimizer,
                                     TrainStepConfig config) {
  check_memory_steps(options, context.layout());
  if (options.optimizer_in_backward) return std::make_unique<ch07::OptimizerInBackwardStep>(model, optimizer, config);
  if (options.zero > 0) {
    const ch07::ZeroShards shards = ch07::zero_shards(options.zero, model.parameters(), context.dp().size(),
                                                      context.dp().rank(), parallel.bucket_bytes);
    return ch07::make_zero_step(options.zero, context.dp(), shards, parallel.dp_stage, model, optimizer, config,
                                options.zero_prefetch);
  }
  return ch08::make_train_step(context, parallel, model, optimizer, config);
}

void with_whole_model(TrainStep& step, const std::function<void()>& use) {
  if (auto* stage3 = dynamic_cast<ch07::ZeroStage3Step*>(&step))
    stage3->with_whole_model(use);
  else
    use();
}

std::unique_ptr<AdamW> whole_optimizer_for_checkpoint(const comm::ParallelContext& context, const AdamW& optimizer,
                                                      GPT2& model) {
  if (!optimizer.sharded()) return nullptr;
  return ch07::gather_whole_optimizer(context.dp(), optimizer, model.parameters());
}

}  // namespace lab
