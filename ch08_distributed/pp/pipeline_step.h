// The training step of pipeline parallelism: TrainStep with its loop over micro-batches replaced by the
// pipeline's schedule (GPipe or 1F1B), on this rank's stage of the model.
//
// `--pp P --batch B --micro-batches M` runs M micro-batches of B sequences through the P stages per step,
// each backward adding 1/M of its gradient: the same step as one process with `--batch B` accumulating M
// micro-batches. After the schedule:
//   1. the tied embedding's two copies sum their gradients (tied_embedding.h);
//   2. with data parallelism, the stage's gradients are averaged over its dp group (the dp stage's
//      GradientReducer, as DataParallelStep uses it; the overlapped stage starts during the last backward);
//   3. the gradient norm sums each stage's (and each tp rank's) share once (tp/gradient_norm.h).
// The loss, computed on the last stage, is all-reduced to every stage of the pipeline and averaged over the dp
// group, on the device, so every rank logs the loss of the whole global batch and enqueue() reads nothing back.
//
// Each step also measures the pipeline's bubble: every stage marks its forwards and backwards (busy) and the
// whole schedule (span, from a barrier that starts the stages together) on its device's clock (CUDA events on a
// GPU: the device is not synchronised between the ops), and when the step is reported, bubble_fraction() of the
// pipeline's busy times over its longest span is what the stages spent idle, next to the ideal
// (P-1)/(M+P-1).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ch08_distributed/pp/stage.h"
#include "ch08_distributed/pp/stage_link.h"
#include "ch08_distributed/pp/tied_embedding.h"
#include "common/comm/parallel_context.h"
#include "common/dist/gradient_reducer.h"
#include "common/train/train_step.h"

namespace lab::ch08::pp {

struct PipelineStepStats {
  bool bubble_measured = true;  // false for a step replayed from a CUDA graph, whose marks cannot be read
  double bubble = 0;            // measured: the mean over stages of the step's idle fraction
  double ideal_bubble = 0;      // (P-1)/(M+P-1)
  int peak_live = 0;            // the most micro-batches this stage held at once
  double busy_seconds = 0;      // this stage's forwards and backwards
  double span_seconds = 0;      // the pipeline's schedule, first stage's start to last stage's end
};

class PipelineStep : public TrainStep {
 public:
  // Collective over context.world() (it forms the embedding groups). `model` is this rank's shard
  // (tp::model_for_rank), config.accum_steps the micro-batches per step. `dp_reducer` averages the gradients
  // over context.dp() (null with one data-parallel rank). The context, model and optimizer must outlive the step.
  PipelineStep(const comm::ParallelContext& context, PpSchedule schedule,
               std::unique_ptr<dist::GradientReducer> dp_reducer, GPT2& model, AdamW& optimizer,
               TrainStepConfig config);

  // As of the last report() (run() reports).
  const PipelineStepStats& last_stats() const { return stats_; }
  const dist::GradientReducer* dp_reducer() const { return dp_reducer_.get(); }
  // Captured in a CUDA graph where every group's transfers can be queued on the stream (NCCL): the sends and
  // receives of the schedule, the tied embedding's and the loss's all-reduces and the data-parallel reducer go
  // into the graph; the stages then run untimed (no bubble is measured) and without the barrier that starts them
  // together for the timing.
  std::string capture_blocker() const override;
  void prepare_capture() override;

 protected:
  // Fills result.loss and data_seconds; the forward and backward phases interleave, so with time_phases their
  // time is reported together as forward_seconds.
  void run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) override;
  void reduce_gradients() override;
  void compute_gradient_norm() override;
  // Reads the stages' device times and measures the bubble (collective over the pipeline).
  void after_report() override;
  void before_read_back() override;

 private:
  const comm::ParallelContext& context_;
  StageLink link_;
  PipelineStage stage_;
  TiedEmbedding tied_embedding_;
  std::unique_ptr<dist::GradientReducer> dp_reducer_;
  PipelineStepStats stats_;

  // The groups this rank's step communicates over: pipeline, data- and tensor-parallel, and the tied embedding's.
  std::vector<comm::Communicator*> groups() const;
};

}  // namespace lab::ch08::pp
