// The workload of gpt2_step_bench: one GPT-2, its AdamW and the trainer's TrainStep on a fixed random batch,
// built from the bench's settings by the trainer's builder (build_run, run_config.h) and timed step by step (each phase
// apart). The single run and every rung of a staircase (--staircase) build one of these.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ch10_gpt2/model_rungs.h"
#include "ch10_gpt2/run_config.h"
#include "common/nn/gpt2.h"
#include "common/ops/cpu/gemm.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/flags.h"

namespace lab {

// The settings a step depends on (a staircase's rungs change these).
struct StepBenchSettings {
  std::string model = "d12";
  std::string device = "auto";
  std::string dtype = "fp32";
  std::string kernels = "reference";
  std::string attention = "materialized";
  std::string recompute = "none";
  std::string activations = "fp32";
  std::string lm_head = "full";
  int64_t lm_head_rows = 0;
  bool cuda_graphs = false;  // replay the step from a CUDA graph (ch09_advanced/graphed_step.h)
  int64_t batch = 4;
  // Instead of --batch: the largest micro-batch whose step's allocator peak fits this many bytes ("8GiB"), searched
  // as gpt2_train --find-max-batch searches it (ch07_memory/max_batch.h); empty: --batch as given. A staircase's
  // rung may give "earlier-rungs", the highest peak measured on the rungs below it (run_staircase_bench resolves it).
  std::string batch_fits;
  int64_t accumulate = 1;  // micro-batches of --batch rows per step, their gradients accumulated
  int64_t seq = 64;
  int64_t steps = 10;
  int64_t warmup = 2;

  void register_flags(Flags& flags);
  // --kernels, --attention and --recompute as the model's rungs; Error(InvalidArgument) for a bad value.
  ModelRungs model_rungs() const;
  // The run these settings describe (Error(InvalidArgument) for a bad value).
  RunConfig run_config() const;
  // From a flag list in the same form (a staircase rung's flags); Error(InvalidArgument) on a bad one.
  static StepBenchSettings from_flags(const std::vector<std::string>& flags);
};

// The timed steps, in seconds, one sample per step (forward, backward and optimizer stay empty under CUDA graphs,
// whose step is one launch).
struct StepSamples {
  std::vector<double> step, forward, backward, optimizer;
};

class StepBench {
 public:
  // Builds the model (weights from seed 1) and the random tokens of a step (seed 2) on the settings' device, with
  // their math mode and kernels; with batch_fits, after searching the batch (settings() then holds the one found,
  // and the allocator's peak is reset after the search). Error for a setting this machine cannot run (tf32 on a
  // CPU), or when not even one row fits the budget.
  explicit StepBench(const StepBenchSettings& settings);

  // Runs the warm-up steps (at least two under CUDA graphs: the eager step that fills the graph's pool and the
  // capture), then the timed ones; `on_step(i, seconds)` after each timed step (to print it).
  StepSamples run(const std::function<void(int64_t, double)>& on_step = {});
  // The sgemm calls of one more step (the CPU's GEMM floor times each shape alone).
  std::vector<ops::cpu::GemmShape> record_gemm_shapes();
  // One more step, untimed (the step profile's: common/core/step_profile.h).
  void run_one_step();

  const StepBenchSettings& settings() const { return settings_; }
  Device device() const { return device_; }
  const GPT2& model() const { return *run_.model; }
  // The settings with the batch the bench runs (--batch-fits: the one found).
  int64_t tokens_per_step() const { return settings_.batch * settings_.seq * settings_.accumulate; }

 private:
  StepBenchSettings settings_;
  Device device_;
  TrainingRun run_;            // the model, its AdamW and the step (replayed from a CUDA graph with cuda_graphs)
  BatchSource micro_batches_;  // a step's micro-batches of random tokens, the same ones every step

  TrainStepResult run_step();
  // --batch-fits: the largest micro-batch whose step fits the budget, measured on a run of `config` built for it.
  int64_t search_batch(const RunConfig& config);
};

}  // namespace lab
