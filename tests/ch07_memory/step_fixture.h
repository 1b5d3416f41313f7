// What the tests of chapter 7's training steps share: a small GPT-2 and the random batches of a short run,
// the same on every rank, so that a step under test and the ordinary step see identical inputs.
#pragma once

#include <cstdint>

#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"

namespace lab::testing {

// 4 layers, 2 heads, 32 wide, block 16, vocabulary 96 (padded to 128): the tied embedding is small beside the
// blocks, so that per-rank byte counts are dominated by what ZeRO shards.
GPT2Config small_step_config();

inline AdamWConfig step_test_adamw() {
  return {0.9f, 0.95f, 1e-8f, 0.1f};
}

// A step's settings: `accum_steps` micro-batches, clipping at `grad_clip` (0: off), the rest left at defaults.
inline TrainStepConfig step_test_config(int64_t accum_steps, double grad_clip) {
  TrainStepConfig c;
  c.accum_steps = accum_steps;
  c.grad_clip = grad_clip;
  return c;
}

// Micro-batch `micro` of step `step`: `rows` rows of `seq` random tokens and their targets, rows
// [first_row, first_row + rows) of the global batch that seeds them (a data-parallel rank's share).
MicroBatch step_test_batch(int step, int micro, int64_t global_rows, int64_t first_row, int64_t rows, int64_t seq);

}  // namespace lab::testing
