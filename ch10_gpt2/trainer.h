// The GPT-2 trainer: data, model, optimizer, schedule, evaluation, sampling, checkpoints and logs,
// driven by TrainOptions. gpt2_train is a thin main() around it; tests drive it directly. The step itself and
// the loop over steps are common/train's (TrainStep, TrainingLoop); the trainer supplies the batches and does
// its logging, evaluation, sampling and checkpoints after each step.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/train_log.h"
#include "ch10_gpt2/train_options.h"
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
  bool interrupted = false;      // stopped early because stop_requested() said so
  int64_t checkpoint_step = -1;  // the step of the last checkpoint this run wrote to --save (-1: none)
};

class Trainer {
 public:
  // Checks every output (--save, --log-json) and the resume checkpoint first, then reads the data and builds
  // the model: a bad destination costs no work.
  explicit Trainer(TrainOptions options);
  ~Trainer();
  // Trains up to --steps. `stop_requested` is polled between steps; when it returns true the run stops after
  // the step in progress and writes a checkpoint when --save was given (see stop_signals.h).
  TrainSummary run(const std::function<bool()>& stop_requested = {});
  bool has_validation() const { return val_loader_ != nullptr; }

  const GPT2& model() const { return *model_; }

 private:
  TrainState read_resume_state() const;  // the --resume checkpoint's state, checked against the options
  GPT2Config model_config(const TrainState& resumed) const;
  void setup_data();
  void setup_model();
  double evaluate();
  std::string sample_text(int64_t step);
  void save_checkpoint_at(int64_t step);
  Json log_header() const;
  void log_step(int64_t step, const TrainStepResult& r);

  TrainOptions options_;
  Device device_;
  MathMode math_mode_ = MathMode::FP32;
  int64_t accum_steps_ = 1;
  double flops_per_token_ = 0;
  std::optional<double> peak_flops_;
  std::string peak_name_;

  std::unique_ptr<GPT2> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<TrainStep> step_;
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
