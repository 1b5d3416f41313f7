// What the tests of parallel layouts share: a small GPT-2 with a padded vocabulary that tensor parallelism
// pads further, the global batches of a step, the single-process run every layout must match, and one
// layout's run under mpirun.
//
// Every rank computes the single-process reference by itself (the model is small), then the layout's run on
// its part of the model and of the batch: with dp D, data-parallel rank d reads rows [d B, (d+1) B) of each
// global micro-batch of D B rows, as the loaders' rank sharding does.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ch08_distributed/parallel_options.h"
#include "common/comm/parallel_context.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/train/train_step.h"

namespace lab::testing {

// The constant learning rate of every run, and the gradient norm clipping brings larger norms down to (below
// the initial norms of these runs, so that clipping takes part).
inline constexpr float kLearningRate = 1e-3f;
inline constexpr double kGradClip = 0.5;

struct LayoutCase {
  comm::ParallelLayout layout;
  ch08::PpSchedule schedule = ch08::PpSchedule::OneFOneB;
  std::string name() const;  // "dp1_tp2_pp1_1f1b"
};

// 4 layers, 4 heads, 32 wide, block 16; vocabulary 300, padded to 384, and to 512 under tp 2 or 4 (a whole
// slice of padding with tp 4).
GPT2Config layout_test_config();

struct RunSettings {
  int64_t batch = 2;  // rows per data-parallel rank and micro-batch
  int64_t seq = 16;
  int64_t micro_batches = 4;
  int steps = 5;
  uint64_t seed = 1234;
  std::optional<LossScalerConfig> fp16;  // when set: fp16 matmuls and dynamic loss scaling with this scaler
  TrainStepConfig step_config() const;   // micro_batches accumulated, clipping at kGradClip
};

// The tokens [rows, seq + 1] of micro-batch `micro` of step `step`: rows of the global batch.
Tensor global_tokens(const RunSettings& run, int64_t rows, int step, int micro);

struct RunResult {
  std::vector<double> losses, grad_norms;  // per step
  std::vector<double> loss_scales;         // per step, under fp16 (0 otherwise)
  std::vector<bool> skipped;               // per step: loss scaling found inf/NaN gradients
  std::map<std::string, Tensor> weights;   // this rank's parameters at the end (CPU)
};

// The single-process run on batches of dp * batch rows.
RunResult run_single_process(const GPT2Config& config, const RunSettings& run, int dp);

// One layout's run: this rank's context, model, optimizer and step (ch08::make_train_step), and its result.
struct LayoutRun {
  std::unique_ptr<comm::ParallelContext> context;
  std::unique_ptr<GPT2> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<TrainStep> step;
  RunResult result;
};

// The layout's run on `world`, whose size must be the layout's ranks. Collective over `world`.
LayoutRun run_layout(comm::Communicator& world, const LayoutCase& layout_case, const GPT2Config& config,
                     const RunSettings& run);

// `whole` (a whole-model parameter of the single-process model) cut to the slice `model` holds.
Tensor slice_for(const GPT2& model, const std::string& name, const Tensor& whole);

}  // namespace lab::testing
