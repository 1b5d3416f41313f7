// The training step of data parallelism: TrainStep with its gradients averaged over the data-parallel group.
//
// Each rank runs the step's micro-batches on its own share of the global batch (the loader's rank sharding:
// common/data/batch_plan.h), so after backward each rank holds the gradient of its share; the reducer
// (gradient_reducer.h, one of three stages) makes every rank hold their mean, the gradient of the whole global
// batch. From there every rank computes the same norm, clips alike and makes the same update, and the
// replicas stay identical without ever exchanging weights.
//
// What stays exact: the loss is averaged over the group too (the logged loss is the global batch's); clipping
// uses the norm of the averaged gradient; with gradient accumulation each backward adds 1/accum_steps of its
// gradient, and only the last micro-batch's backward starts the overlapped stage's all-reduces. With equal
// shares, the mean over ranks of the per-rank means is the mean over the global batch, so `--dp D --batch B`
// trains as one process with `--batch D*B`, up to the order of floating-point additions.
//
// Captured in a CUDA graph (--cuda-graphs, ch09_advanced/graphed_step.h): over NCCL the group's collectives are
// queued on the step's stream (comm::Communicator::set_queued; the overlapped stage's on a side stream forked
// from it), so the graph holds the all-reduces between backward and the update, and every replay runs them;
// report() first waits for them under the group's timeout.
// Every rank replays its own graph of the same collectives, as NCCL requires of a captured collective.
#pragma once

#include <memory>
#include <string>

#include "common/dist/gradient_reducer.h"
#include "common/train/train_step.h"

namespace lab::dist {

class DataParallelStep : public TrainStep {
 public:
  // `group` is the data-parallel group (ParallelContext::dp()); it, the model and the optimizer must outlive
  // the step. Collective over `group` (the overlapped stage splits it).
  DataParallelStep(comm::Communicator& group, DpStage stage, int64_t bucket_bytes, GPT2& model, AdamW& optimizer,
                   TrainStepConfig config);

  const GradientReducer& reducer() const { return *reducer_; }
  // Capturable where the group's collectives can be queued on the stream (NCCL, or a group of one), with every
  // stage (the overlapped one forks its all-reduces onto a side stream of the capture).
  std::string capture_blocker() const override;
  void prepare_capture() override;

 protected:
  void run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) override;
  void forward_backward(const MicroBatch& batch, TrainStepResult& result) override;
  void reduce_gradients() override;
  void before_read_back() override;

 private:
  comm::Communicator& group_;
  std::unique_ptr<GradientReducer> reducer_;
  int64_t micro_batch_ = 0;  // the step's micro-batches run so far
};

}  // namespace lab::dist
