// The optimizer and training step of a run, composed from chapter 7's memory rungs, the ones that change how the
// optimizer state and the gradients are held (`--optimizer-in-backward`, `--offload optimizer`, `--zero 1|2|3`),
// and chapter 8's layouts, with the combinations they refuse declared once here. Without a memory rung: the
// plain AdamW and chapter 8's step for the layout. build_run (run_config.h) builds every run's optimizer and step
// through this.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ch08_distributed/parallel_options.h"
#include "common/comm/parallel_context.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"

namespace lab {

struct MemoryStepOptions {
  bool optimizer_in_backward = false;
  bool offload_optimizer = false;
  int zero = 0;                // ZeRO stage; 0: none
  bool zero_prefetch = false;  // stage 3 gathers the next block while the current one computes
};

// Why the rungs cannot train together, as the one line a user sees (naming the flags); empty when they can:
// --zero with tensor or pipeline parallelism, with --optimizer-in-backward or with --offload, --offload with
// --optimizer-in-backward, --optimizer-in-backward with more than one rank, a ZeRO stage other than 0, 1, 2, 3,
// --zero-prefetch without --zero 3.
std::string memory_steps_refusal(const MemoryStepOptions& options, const comm::ParallelLayout& layout);
// Error(InvalidArgument) with memory_steps_refusal()'s line when there is one.
void check_memory_steps(const MemoryStepOptions& options, const comm::ParallelLayout& layout);

// AdamW over the model's parameters: with ZeRO, keeping moments for this data-parallel rank's shard only; with
// offload, its state in host memory.
std::unique_ptr<AdamW> make_optimizer(const MemoryStepOptions& options, const comm::ParallelContext& context,
                                      const ch08::ParallelOptions& parallel, GPT2& model, const AdamWConfig& config);

// The training step: the optimizer in backward, a ZeRO stage, or chapter 8's step for the layout. Collective
// over the context's groups. ZeRO stage 3 shards the model's parameters as they are now: set or load the
// weights first.
std::unique_ptr<TrainStep> make_step(const MemoryStepOptions& options, const comm::ParallelContext& context,
                                     const ch08::ParallelOptions& parallel, GPT2& model, AdamW& optimizer,
                                     TrainStepConfig config);

// Runs `use` with the model's parameters whole in their flat buffer: as they are, or gathered from ZeRO stage 3's
// shards for the time of the call (collective over the data-parallel group then). For checkpoints.
void with_whole_model(TrainStep& step, const std::function<void()>& use);

// For a checkpoint: the whole model's optimizer state gathered from the data-parallel ranks' shards (every rank
// calls it), or nullptr when `optimizer` is not sharded (it holds the whole state already).
std::unique_ptr<AdamW> whole_optimizer_for_checkpoint(const comm::ParallelContext& context, const AdamW& optimizer,
                                                      GPT2& model);

}  // namespace lab
