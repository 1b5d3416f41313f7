// The GPT-2 trainer: data, model, optimizer, schedule, evaluation, sampling, checkpoints and logs,
// driven by TrainOptions. gpt2_train is a thin main() around it; tests drive it directly. The step itself and
// the loop over steps are common/train's (TrainStep, TrainingLoop); the trainer supplies the batches and does
// its logging, evaluation, sampling and checkpoints after each step.
//
// Distributed (under mpirun, given the world's communicator): the ranks form the --dp x --tp x --pp layout
// (a ParallelContext over the device's communicator) and build_run (run_config.h) builds this rank's model,
// optimizer and step for it. Every rank runs the same loop; rank 0 alone prints, writes the JSON log and
// writes checkpoints, and the loss and gradient norm it logs are the whole global batch's. Data-parallel rank
// d reads its share of each global batch (the loader's rank sharding with rank d of dp), so `--dp D --batch B`
// sees the tokens of one process with `--batch D*B`. The decision to stop is collective (the largest signal
// of any rank, agreed before each step), so all ranks stop before the same step and the checkpoint is
// consistent. A checkpoint records its layout and resumes under another data-parallel size when the global
// micro-batch (--batch x dp) and --total-batch-tokens stay the same (the same batches, the same step).
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "ch08_distributed/parallel_options.h"
#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/run_config.h"
#include "ch10_gpt2/train_log.h"
#include "ch10_gpt2/train_options.h"
#include "common/comm/communicator.h"
#include "common/comm/parallel_context.h"
#include "common/data/loader.h"
#include "common/optim/lr_schedule.h"
#include "common/text/tokenizer.h"
#include "common/train/math_mode.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"

namespace lab {

struct TrainSummary {
  int64_t steps = 0;             // optimizer steps completed in total
  double last_loss = NAN;        // training loss of the last step (NaN when this run trained none)
  double last_val_loss = NAN;    // NaN when there is no validation split
  double seconds = 0;            // wall time of this run's steps
  std::string sample;            // the last text sample ("" when none)
  bool interrupted = false;      // stopped early because a rank's stop signal said so
  int stop_signal = 0;           // that signal, the same on every rank (0: none)
  int64_t checkpoint_step = -1;  // the step of the last checkpoint this run wrote to --save (-1: none)
};

class Trainer {
 public:
  // Checks every output (--save, --log-json) and the resume checkpoint first, then reads the data and builds
  // the model: a bad destination costs no work. One process.
  explicit Trainer(TrainOptions options);
  // One rank of a distributed run over `world` (World::comm(); it must outlive the trainer). Collective.
  Trainer(TrainOptions options, comm::Communicator& world);
  ~Trainer();
  // Trains up to --steps. `stop_signal` (this rank's pending signal, 0 for none: stop_signals.h) is polled
  // before each step and agreed across the ranks; when any rank has one, every rank stops after the step in
  // progress and a checkpoint is written when --save was given. Collective.
  TrainSummary run(const std::function<int()>& stop_signal = {});
  bool has_validation() const { return val_loader_ != nullptr; }
  // Rank 0: the rank that prints, logs and saves.
  bool leader() const { return world_->rank() == 0; }

  const GPT2& model() const { return *run_.model; }
  const comm::ParallelContext& context() const { return *context_; }

 private:
  // `world` null: one process, with a single-process world of its own.
  Trainer(TrainOptions options, comm::Communicator* world);
  void setup_parallel();
  TrainState read_resume_state() const;  // the --resume checkpoint's state, checked against the options
  GPT2Config model_config(const TrainState& resumed) const;
  void setup_data();
  // NaN without validation data, or when `stop` (checked between batches) said to stop.
  double evaluate(const std::function<bool()>& stop = {});
  std::string sample_text(int64_t step);
  void save_checkpoint_at(int64_t step);
  Json log_header() const;
  void log_step(int64_t step, const TrainStepResult& r);
  // What the run's configuration says.
  Device device() const { return run_config_.device; }
  const comm::ParallelLayout& layout() const { return run_config_.parallel.layout; }
  int64_t accum_steps() const { return run_config_.step.accum_steps; }

  TrainOptions options_;
  std::unique_ptr<comm::Communicator> single_process_world_;  // the world of a one-process trainer
  comm::Communicator* world_;
  std::unique_ptr<comm::Communicator> device_comm_;  // the world, for the device's tensors
  std::unique_ptr<comm::ParallelContext> context_;
  double flops_per_token_ = 0;
  std::optional<double> peak_flops_;
  std::string peak_name_;

  RunConfig run_config_;  // the options as typed settings, model, optimizer and step built from them
  TrainingRun run_;
  LrSchedule schedule_;
  std::unique_ptr<BatchLoader> train_loader_, val_loader_;
  std::unique_ptr<GPT2Tokenizer> tokenizer_;
  std::unique_ptr<JsonLog> log_;
  Rng sample_rng_;
  int64_t start_step_ = 0;
  double run_seconds_ = 0;
  Tensor inputs_, targets_;  // batch buffers (on the loader's device)
};

}  // namespace lab
