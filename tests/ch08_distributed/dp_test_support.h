// What the data-parallel tests share: a small GPT-2 trained a few steps on fixed random batches, once by one
// process on the whole global batches (the reference, computed on every rank) and once by a training step of
// a parallel layout on each rank's share, and the comparison of the two.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"

namespace lab::testing {

// The model of these runs: the layout tests' (4 layers, 32 wide, vocabulary 300 padded to 384), small enough
// that every rank of an oversubscribed CI machine trains it twice in a few seconds.
GPT2Config dp_test_config();

struct DpRunSettings {
  int64_t steps = 5;
  int64_t accum_steps = 1;
  double grad_clip = 0;  // off
  int64_t rows = 2;      // each rank's micro-batch
  int64_t seq = 16;
  uint64_t seed = 7;
};

struct DpRunResult {
  std::vector<double> losses, grad_norms;
  std::vector<float> params;  // the final flat parameter buffer
};

// The micro-batches of the whole run, each of `ranks` x rows rows: global batch s's micro-batch a is
// batches[s * accum_steps + a]. The same on every rank (drawn from the seed).
std::vector<MicroBatch> global_micro_batches(const DpRunSettings& s, int ranks);

// Rows [rank rows, (rank+1) rows) of a global micro-batch: this rank's share.
MicroBatch share_of(const MicroBatch& global, int rank, int64_t rows);

// Trains a fresh dp_test_config() GPT-2 (initialised from the seed) with the step `make_step` returns, feeding it
// `batches` in order, at a fixed learning rate; `inspect` sees the step after the last one.
//
// AdamW's eps is 1e-3 here, not 1e-8: with a tiny eps, an element whose gradient sums to about zero has its
// sign decided by rounding (which differs between one process and several, which add in other orders), and
// Adam turns either sign into a whole step of size lr. With eps near the gradients' scale the update is a
// smooth function of the gradient, so rounding stays rounding in the weights.
DpRunResult train_small(const DpRunSettings& s, const std::vector<MicroBatch>& batches,
                        const std::function<std::unique_ptr<TrainStep>(GPT2&, AdamW&, TrainStepConfig)>& make_step,
                        const std::function<void(const TrainStep&)>& inspect = {});

// Losses and norms within 1e-5 relative, parameters within the fp32 tolerance of a few steps of AdamW.
void expect_same_run(const DpRunResult& got, const DpRunResult& reference, const std::string& what);

}  // namespace lab::testing
