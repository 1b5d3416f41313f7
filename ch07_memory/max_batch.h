// Rung 6 of the memory staircase: the largest micro-batch that fits, `gpt2_train --find-max-batch
// --memory-budget 8GiB`, with whatever rungs below are switched on (accumulation, recompute, and the optimizer
// and sharding rungs: the search runs the trainer's own step).
//
// What changes from the previous rungs: nothing in the step; the freed memory is spent. Each rung below lowers
// the peak at a given micro-batch; this one turns the savings into rows, which is what buys speed on a GPU
// (larger GEMMs, fewer accumulation steps for the same tokens).
//
// The search measures, never guesses the answer: at a fixed sequence length a step's peak is affine in the rows
// of its micro-batch (every activation, the attention probabilities included, is rows x a per-row size), so
// two measured steps, at 1 and 2 rows, predict the peak of any micro-batch; the predicted largest one is then
// measured, and stepped down until its measured peak fits. Nothing above the budget is ever run on purpose: on
// a shared machine the step that would not fit is the one not to try.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/train/train_step.h"

namespace lab::ch07 {

// "8GiB", "512MiB", "64KiB", "1.5GiB", "8GB" (10^9), "1000000" (bytes). InvalidArgument otherwise.
int64_t parse_byte_size(const std::string& text);

struct MaxBatchSearch {
  struct Trial {
    int64_t rows;
    int64_t peak_bytes;  // measured
  };
  int64_t rows = 0;            // the largest micro-batch measured to fit (0: not even one row fits)
  int64_t peak_bytes = 0;      // its measured peak
  int64_t next_predicted = 0;  // the predicted peak of one row more (above the budget)
  std::vector<Trial> trials;   // every measurement, in order
  std::string str(int64_t budget) const;
};

// `peak_of(rows)` runs a step with that micro-batch and returns its measured peak. At most `max_rows`.
MaxBatchSearch find_max_batch(const std::function<int64_t(int64_t rows)>& peak_of, int64_t budget_bytes,
                              int64_t max_rows);

// The search over a training step: each measurement is one step.run() at learning rate 0 (the weights do not
// move) on random tokens, micro-batches of `rows` x `seq`, its peak the allocator's over the step.
MaxBatchSearch find_max_batch(TrainStep& step, int64_t seq, int64_t budget_bytes, int64_t max_rows);

}  // namespace lab::ch07
