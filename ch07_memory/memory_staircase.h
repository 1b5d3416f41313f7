// The memory staircase of chapter 7 as data, and how a step is measured: each rung is one setting of gpt2_train
// added to the rung below it (common/lab/staircase.h holds them to that). ch07_memory_bench runs each rung through
// the trainer's builder (ch10_gpt2/run_settings.h: its own model, optimizer and training step on a fixed random
// batch in this process) and measures it here: one untimed step, then timed steps, the allocator's peak of each
// category reset before each step.
//
// Every rung processes the same tokens per optimizer step (--total-batch-tokens = batch x seq), so the rungs
// differ in memory and time only. Every rung trains without gradient clipping (--grad-clip 0 in the base flags):
// the optimizer in backward cannot clip (optimizer_in_backward.h), and a staircase changes one setting at a
// time. Adding a rung is one line in memory_staircase(): the builder reads every flag of gpt2_train's rungs.
//
// The optimizer in backward refuses gradient accumulation (every gradient would stay alive across the
// micro-batches), so the rungs above block recompute go back to the whole batch in one pass first
// ("block-one-pass"): block recompute is what leaves room for it. The last rung is chapter 9's flash attention
// (--attention flash), on top of everything: with block recompute, what it removes is the probabilities of the
// block re-run during backward (its full effect without recompute is in ch07_memory_bench's theory tables).
//
// The measurement (measure_steps) is shared with the ZeRO staircase (zero_staircase.h), whose ranks time their
// steps together.
#pragma once

#include <vector>

#include "common/comm/communicator.h"
#include "common/lab/staircase.h"
#include "common/nn/gpt2.h"
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

// ---- what the staircases share: reading settings, the batch, the measurement

// The setting `name` ("" when absent: `absent`), and one that must be there as an integer (InvalidArgument
// naming the flag otherwise).
std::string setting_or(const staircase::Settings& settings, const std::string& name, const std::string& absent);
int64_t int_setting(const staircase::Settings& settings, const std::string& name);

// `rows` x `seq` random token ids and targets below `vocab_size`, the same at every call (a fixed seed): the
// tokens of one optimizer step, alike for every rung and every rank.
MicroBatch random_step_batch(int64_t vocab_size, int64_t rows, int64_t seq, Device device);

// Hands out the rows of `step_rows`, `micro_rows` at a time, starting over after the last.
BatchSource micro_batches_of(const MicroBatch& step_rows, int64_t micro_rows);

// One untimed step of `step` (first-touch page faults, caches filled), then `steps` timed ones, the peaks of
// `device`'s allocator reset before each. Measures "peak_MiB" (this rank's, all categories together),
// "<category>_MiB" (this rank's peak of each category) and "step_ms", the slowest rank's step time; with more
// than one rank in `group` also "max_rank_peak_MiB", the largest peak_MiB over the ranks. Collective over
// `group` (the ranks that run `step` together).
std::vector<staircase::Measurement> measure_steps(TrainStep& step, const BatchSource& source, Device device,
                                                  int64_t steps, comm::Communicator& group);

}  // namespace lab::ch07
