// The loop over training steps (see training_loop.h).
#include "common/train/training_loop.h"

#include "common/core/error.h"

namespace lab {

TrainingLoop::TrainingLoop(TrainStep& step, BatchSource next_batch, LrSchedule schedule)
    : TrainingLoop([&step](const BatchSource& batches, double lr) { return step.run(batches, lr); },
                   std::move(next_batch), schedule) {}

TrainingLoop::TrainingLoop(StepRunner run_step, BatchSource next_batch, LrSchedule schedule)
    : run_step_(std::move(run_step)), next_batch_(std::move(next_batch)), schedule_(schedule) {}

TrainingLoopResult TrainingLoop::run(int64_t first_step, int64_t end_step, const StepCallback& on_step,
                                     const std::function<bool()>& stop_requested) {
  TrainingLoopResult result;
  result.steps = first_step;
  for (int64_t step = first_step; step < end_step; ++step) {
    if (stop_requested && stop_requested()) {
      result.interrupted = true;
      break;
    }
    const TrainStepResult r = run_step_(next_batch_, schedule_.at(step));
    // Loss scaling scales only the backward: a forward pass that overflowed fp16 overflows again at any scale.
    LAB_CHECK(std::isfinite(r.loss) || r.loss_scale == 0, Internal, "fp16 overflow in the forward pass at step ",
              step + 1, ": the loss is ", r.loss,
              " (a weight or activation beyond fp16's range, 65504, which loss scaling cannot fix); "
              "train with --dtype bf16 (fp32's range) or a smaller learning rate");
    LAB_CHECK(std::isfinite(r.loss), Internal, "training diverged: loss is ", r.loss, " at step ", step + 1);
    result.last_loss = r.loss;
    result.steps = step + 1;
    if (on_step) on_step(step, r);
  }
  return result;
}

}  // namespace lab
