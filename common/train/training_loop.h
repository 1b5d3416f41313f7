// The training loop: steps [first, end) of a TrainStep at the learning rates of a schedule, with a callback
// after each step (where the trainer logs, evaluates, samples and saves checkpoints) and a stop request polled
// before each one (the trainer's SIGINT/SIGTERM handling; see ch10_gpt2/stop_signals.h).
//
// A loss that is not finite stops the loop with Error(Internal): "training diverged: loss is nan at step 12", or,
// under fp16 loss scaling, a message that says the forward pass overflowed fp16 (no scale can help there).
// Chapter benchmarks use it to run a few steps and collect what the callback sees, without the trainer.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>

#include "common/optim/lr_schedule.h"
#include "common/train/train_step.h"

namespace lab {

struct TrainingLoopResult {
  int64_t steps = 0;         // steps completed in total: the step number the next run would start from
  bool interrupted = false;  // stopped early because stop_requested() said so
  double last_loss = NAN;    // the last step's loss (NaN when none ran)
};

class TrainingLoop {
 public:
  // `step` (0-based) has just completed with `result`.
  using StepCallback = std::function<void(int64_t step, const TrainStepResult& result)>;
  // Runs one step, as TrainStep::run does (or a replay of one: ch09_advanced/graphed_step.h).
  using StepRunner = std::function<TrainStepResult(const BatchSource& next_batch, double lr)>;

  // The step, the source of micro-batches and the schedule must outlive the loop.
  TrainingLoop(TrainStep& step, BatchSource next_batch, LrSchedule schedule);
  TrainingLoop(StepRunner run_step, BatchSource next_batch, LrSchedule schedule);

  // Runs steps first_step, ..., end_step - 1; before each, stop_requested (when given) is asked whether to
  // stop. Returns with steps = first_step when none ran.
  TrainingLoopResult run(int64_t first_step, int64_t end_step, const StepCallback& on_step = {},
                         const std::function<bool()>& stop_requested = {});

  const LrSchedule& schedule() const { return schedule_; }

 private:
  StepRunner run_step_;
  BatchSource next_batch_;
  LrSchedule schedule_;
};

}  // namespace lab
