// A run's configuration from a staircase rung's settings (gpt2_train's flag names: common/lab/staircase.h), and one
// rung measured through build_run: how a chapter's bench runs its staircase on the one builder, so that any of its
// rungs may set any chapter's flag. The staircases themselves stay in their chapters, as data.
#pragma once

#include <cstdint>
#include <vector>

#include "ch10_gpt2/run_config.h"
#include "common/lab/staircase.h"

namespace lab {

// --model (required), --batch and --seq (required), --total-batch-tokens (0: one micro-batch per step),
// --grad-clip (1.0), --dtype, --kernels, --attention, --recompute, --activations, --optimizer-in-backward,
// --offload and --zero as gpt2_train reads them; other settings are the caller's. InvalidArgument, naming the
// flag, for a missing or bad value.
RunConfig run_config_from_settings(const staircase::Settings& settings, Device device);

// One process: the rung's run (weights from seed 1) trained on a fixed random step of tokens (ch07's
// random_step_batch) for one untimed and `steps` timed steps, measured by ch07::measure_steps (the allocator's
// peaks by category and the step time). InvalidArgument for --cuda-graphs (its replays are not steps to measure
// one by one) or a layout of more than one rank.
std::vector<staircase::Measurement> measure_training_rung(const staircase::Settings& settings, Device device,
                                                          int64_t steps);

}  // namespace lab
