// One training run's configuration, typed, and the one builder of its model, optimizer and step.
//
//   RunConfig     what the run is: the model, the device, the math mode (chapter 6), the model's rungs
//                 (ModelRungs: kernels, attention, recompute, activations), the memory rungs that change the step
//                 (MemoryStepOptions: optimizer in backward, offload, ZeRO), the parallel layout (chapter 8), the
//                 step (accumulation, clipping), AdamW, fp16's loss scaling and CUDA graphs (chapter 9)
//   run_refusal   the first combination the run cannot train, as the one line a user sees; every refusal between
//                 two rungs is declared there (or, for the model's rungs, in ModelRungs::incompatibility, and for
//                 the memory rungs in memory_steps_refusal), nowhere else
//   build_run     the model for this rank, the rungs installed in a fixed order, the weights, the optimizer, the
//                 step, mixed precision and the CUDA graph around the step
//
// The trainer and gpt2_step_bench turn their flags into a RunConfig and build through build_run, so a rung is
// added in one place: its field here (or in ModelRungs / MemoryStepOptions), its refusals, and the line of
// build_run that installs it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "ch08_distributed/parallel_options.h"
#include "ch09_advanced/graphed_step.h"
#include "ch10_gpt2/memory_steps.h"
#include "ch10_gpt2/model_rungs.h"
#include "common/comm/communicator.h"
#include "common/comm/parallel_context.h"
#include "common/core/error.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/loss_scaler.h"
#include "common/train/math_mode.h"
#include "common/train/train_step.h"

namespace lab {

struct RunConfig {
  GPT2Config model;
  Device device = Device::cpu();
  MathMode math = MathMode::FP32;
  ModelRungs rungs;                // chapters 6, 7 and 9: the functions the model runs
  MemoryStepOptions memory;        // chapter 7: how the step holds the optimizer state and the gradients
  ch08::ParallelOptions parallel;  // chapter 8: the layout (dp x tp x pp must be the world's size)
  TrainStepConfig step;            // micro-batches per step, clipping, phase timing
  AdamWConfig adamw;
  LossScalerConfig loss_scaling;  // fp16 only
  bool cuda_graphs = false;       // chapter 9: the step replayed from a CUDA graph
};

// Why a run cannot train: the error's kind (InvalidArgument for flags that contradict each other, Unsupported
// for a combination not implemented yet) and the one line a user sees.
struct RunRefusal {
  ErrorKind kind;
  std::string line;
};

// The first combination of `config` that cannot train, or nothing when it can. Cheap, and needs no data or
// model: the trainer checks it before reading anything.
std::optional<RunRefusal> run_refusal(const RunConfig& config);
// Throws run_refusal()'s error when there is one.
void check_run(const RunConfig& config);

// What build_run gives: this rank's model, its optimizer and the training step over them (replayed from a CUDA
// graph under RunConfig::cuda_graphs).
struct TrainingRun {
  std::unique_ptr<comm::Communicator> own_world;       // a one-process run's communicator and context
  std::unique_ptr<comm::ParallelContext> own_context;  // (build_run without a context)
  std::unique_ptr<GPT2> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<ch09::GraphedStep> graphed;

  // One optimizer step: the graph's replay under CUDA graphs, the eager step otherwise.
  TrainStepResult run(const BatchSource& next_batch, double lr);
};

// Sets the weights of a freshly built model (random ones, a checkpoint's, a weights file's). It runs after the
// optimizer is built and before the step is, since ZeRO stage 3's step shards the weights as they are then.
using SetWeights = std::function<void(GPT2& model, AdamW& optimizer)>;

// Builds `config`'s run over `context` (collective over its groups; its layout must be config.parallel.layout),
// after check_run. Without `set_weights`, the weights are init_weights(1)'s.
TrainingRun build_run(const RunConfig& config, const comm::ParallelContext& context,
                      const SetWeights& set_weights = {});
// The same in one process (layout 1 x 1 x 1), with a communicator and context of the run's own.
TrainingRun build_run(const RunConfig& config, const SetWeights& set_weights = {});

}  // namespace lab
