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
  bool cuda_graphs = false;  // replay the step from a CUDA graph (ch09_advanced/graphed_step.h)
  int64_t batch = 4;
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
  // Builds the model (weights from seed 1) and a batch of random tokens (seed 2) on the settings' device, with
  // their math mode and kernels. Error(InvalidArgument) for a setting this machine cannot run (tf32 on a CPU).
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
  int64_t tokens_per_step() const { return settings_.batch * settings_.seq; }

 private:
  StepBenchSettings settings_;
  Device device_;
  TrainingRun run_;  // the model, its AdamW and the step (replayed from a CUDA graph with cuda_graphs)
  Tensor tokens_, targets_;

  TrainStepResult run_step();
};

}  // namespace lab
