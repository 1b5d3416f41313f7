// One pipeline stage running one step's schedule on its model shard: for each micro-batch, the forward and
// the backward of this stage's part of GPT-2, and the transfers with the neighbouring stages in between.
//
// Each micro-batch in flight has its own tape, holding the activations its backward needs: its input
// (received from the previous stage, or the tokens on the first stage) and, on every stage but the last, its
// output, whose gradient the next stage sends back. The backward of micro-batch m then runs m's tape from
// that gradient (or, on the last stage, from the loss), leaving the gradient of its input to send on. Tapes
// are dropped as their backward ends, so a stage holds exactly the micro-batches the schedule keeps in
// flight: all M at GPipe's turn, at most P - stage with 1F1B (peak_live counts them as the step runs).
//
// Every stage reads every micro-batch from the step's batch source, so the loaders of a pipeline's ranks
// stay in step: the first stage uses its tokens, the last its targets, and the activations' shape [B, T, C]
// follows from them on every stage.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "ch08_distributed/pp/schedule.h"
#include "ch08_distributed/pp/stage_link.h"
#include "common/core/device_clock.h"
#include "common/nn/gpt2.h"
#include "common/ops/grad_scale.h"
#include "common/train/train_step.h"

namespace lab::ch08::pp {

struct StageStepStats {
  int peak_live = 0;        // the most micro-batches whose activations the stage held at once
  double data_seconds = 0;  // waiting for micro-batches (within the span, counted as neither busy nor idle)
};

// The device's time in a run, read from its marks (PipelineStage::last_times waits for the run's work).
struct StageTimes {
  double busy_seconds = 0;  // in forwards and backwards
  double span_seconds = 0;  // the whole schedule, transfers and waits included
};

class PipelineStage {
 public:
  // The model (this stage's shard) and the link must outlive the stage.
  PipelineStage(GPT2& model, StageLink& link, PpSchedule schedule)
      : model_(model), link_(link), schedule_(schedule), clock_(model.device()) {}

  // Runs the schedule for `micro_batches` micro-batches from `next_batch`; each backward adds grad_scale
  // times its micro-batch's gradient into the model's gradient buffer (1/micro_batches, times fp16's loss scale,
  // which lives on the device: TrainStep::loss_gradient_scale). The last stage adds each micro-batch's mean loss
  // / micro_batches into `loss_sum` ([1] f32 on the model's device), on the device. `before_last_backward`, when
  // given, runs right before the step's last backward (data parallelism's overlapped all-reduce listens from there).
  // Nothing is read back: the forwards and backwards are timed by marks on the device's clock (last_times()).
  StageStepStats run(const BatchSource& next_batch, int micro_batches, const ops::GradScale& grad_scale,
                     const Tensor& loss_sum, const std::function<void()>& before_last_backward = {});

  // The last run's busy time and span, from its marks; on a GPU this waits for the run's work, so read it once the
  // step is done (PipelineStep reads it when the step is reported).
  StageTimes last_times() const;
  // For runs captured in a CUDA graph (ch09_advanced/graphed_step.h): marks could not be read back, so they run
  // untimed (last_times() gives zeros), and their micro-batches are the graph's fixed device buffers, which stay
  // as they are for the whole step: used where they lie, not copied (a synchronous copy, which a capture refuses).
  void set_captured(bool captured) { captured_ = captured; }
  bool captured() const { return captured_; }

  const GPT2& model() const { return model_; }

 private:
  GPT2& model_;
  StageLink& link_;
  PpSchedule schedule_;
  DeviceClock clock_;
  std::vector<std::pair<int, int>> busy_marks_;  // the last run's forwards and backwards: (start, end) marks
  int span_start_ = 0, span_end_ = 0;            // the last run's schedule
  bool captured_ = false;
};

}  // namespace lab::ch08::pp
