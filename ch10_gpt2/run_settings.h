// A run's configuration from a staircase rung's settings (gpt2_train's flag names: common/lab/staircase.h), and one
// rung measured through build_run: how a chapter's bench runs its staircase on the one builder, so that any of its
// rungs may set any chapter's flag. The staircases themselves stay in their chapters, as data.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ch10_gpt2/run_config.h"
#include "common/lab/staircase.h"

namespace lab {

// Micro-batches per step on each rank, as gpt2_train counts them: --total-batch-tokens over the global
// micro-batch (--batch x --seq on each of the layout's data-parallel ranks), 1 without it; a pipeline's step is its
// --micro-batches (parallel.micro_batches). InvalidArgument, naming the flags, when the tokens are not a whole
// number of global micro-batches or, under --pp, when they say another number than --micro-batches.
int64_t micro_batches_per_rank_step(int64_t total_batch_tokens, int64_t batch, int64_t seq,
                                    const ch08::ParallelOptions& parallel);

// --model (required, unless `model` is given: a model that has no name), --batch and --seq (required),
// --total-batch-tokens (0: one micro-batch per step), --grad-clip (1.0), --dtype, --kernels, --attention,
// --recompute, --activations, --lm-head, --optimizer-in-backward, --offload, --zero, --zero-prefetch, --cuda-graphs and
// the layout's --dp, --tp, --pp (1 each), --dp-stage (overlap), --bucket-mb (25), --micro-batches (1), --pp-schedule
// (1f1b) as gpt2_train reads them; other settings are the caller's. InvalidArgument, naming the flag, for a
// missing or bad value.
RunConfig run_config_from_settings(const staircase::Settings& settings, Device device,
                                   const std::optional<GPT2Config>& model = std::nullopt);

// One rung measured on this rank of `context` (collective over its groups; its layout must be the config's): the
// run built by build_run (weights from seed 1), trained on one fixed random step of tokens (ch07's
// random_step_batch: every data-parallel rank its own rows of it, micro-batches of `rows` x `seq`) for one untimed
// and `steps` timed steps, measured by ch07::measure_steps over the context's world (the allocator's peaks by
// category, the slowest rank's step time). `built`, when given, sees the run once it is built, before its first
// step. InvalidArgument for --cuda-graphs (its replays are not steps to measure one by one).
std::vector<staircase::Measurement> measure_training_rung(const RunConfig& config, int64_t rows, int64_t seq,
                                                          const comm::ParallelContext& context, int64_t steps,
                                                          const std::function<void(const TrainingRun&)>& built = {});
// The same in one process, from the rung's settings (a layout of one rank).
std::vector<staircase::Measurement> measure_training_rung(const staircase::Settings& settings, Device device,
                                                          int64_t steps);

}  // namespace lab
