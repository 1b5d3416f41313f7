// The memory staircase of chapter 7 as data, and how one rung is measured: each rung is one setting of
// gpt2_train added to the rung below it (common/lab/staircase.h holds them to that), and is run here on a
// fixed random batch in this process: its own model, optimizer and training step, one untimed step, then
// timed steps, the allocator's peak of each category reset before each step.
//
// Every rung processes the same tokens per optimizer step (--total-batch-tokens = batch x seq), so the rungs
// differ in memory and time only. Adding a rung is one line in memory_staircase() and, when its flag changes
// the step rather than the model, one line in make_rung_step().
#pragma once

#include <memory>
#include <vector>

#include "common/lab/staircase.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"

namespace lab::ch07 {

struct MemoryBenchConfig {
  std::string model = "d12";
  int64_t batch = 4;  // rows of the original step
  int64_t seq = 64;
  int64_t micro_batches = 4;  // of the accumulation rung (and those above it)
  int64_t steps = 3;          // timed steps per rung
  Device device = Device::cpu();
};

staircase::Staircase memory_staircase(const MemoryBenchConfig& config);

// The training step of a rung's settings over `model` and `optimizer` (the rung's micro-batch count from its
// --batch, --seq and --total-batch-tokens).
std::unique_ptr<TrainStep> make_rung_step(const staircase::Settings& settings, GPT2& model, AdamW& optimizer);

// What one rung measures: "step_ms", "peak_MiB" (all categories together) and "<category>_MiB" for each
// category's own peak, one sample per timed step.
std::vector<staircase::Measurement> measure_rung(const staircase::Settings& settings, const MemoryBenchConfig& config);

}  // namespace lab::ch07
