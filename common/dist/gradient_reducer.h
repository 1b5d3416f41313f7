// How the ranks of a data-parallel group average their gradients: after the step's last backward pass, every
// rank's gradient buffer must hold the mean over the group of the ranks' gradients (each rank's being the
// gradient of its own share of the global batch). Three stages, one file each, each a GradientReducer:
//
//   1 naive     stage1_naive.h       one all-reduce per gradient tensor, after backward
//   2 bucketed  stage2_bucketed.h    the flat gradient buffer, in backward order, in buckets of --bucket-mb
//   3 overlap   stage3_overlapped.h  each bucket's all-reduce starts during backward, as soon as its last
//                                    gradient is final, on a second communicator from a communication thread
//
// DataParallelStep (data_parallel_step.h) calls before_last_backward() and finish() at the right points of a
// training step; a pipeline or tensor-parallel step composes with data parallelism the same way.
#pragma once

#include <cstdint>
#include <memory>

#include "common/comm/communicator.h"
#include "common/dist/dp_stage.h"
#include "common/nn/parameters.h"

namespace lab::dist {

// What one step's gradient averaging did and cost (reset by before_last_backward()).
struct ReductionStats {
  int64_t collectives = 0;  // all-reduce calls
  int64_t bytes = 0;        // their payload: the gradient bytes all-reduced
  // Wall time of the all-reduces, on whichever thread ran them, and the part of it the step waited for after
  // backward (finish()): equal for the first two stages; the overlapped stage hides the difference.
  double comm_seconds = 0;
  double exposed_seconds = 0;
  int64_t started_during_backward = 0;  // overlapped stage: buckets whose all-reduce began before backward ended

  // The fraction of the communication time hidden behind backward, 1 - exposed / communication (0 with none).
  double overlap_fraction() const;
};

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Before the forward and backward pass that completes the step's gradients (the last micro-batch's): the
  // step's statistics start here, and the overlapped stage starts listening for final gradients.
  virtual void before_last_backward();
  // After that backward pass: returns when every gradient holds the mean over the group.
  void finish();

  // For a step captured in a CUDA graph (DataParallelStep::prepare_capture): from here on the reducer's
  // collectives are queued on the device instead of waited for on the host. The naive and bucketed stages
  // all-reduce on the group, which the step queues itself; the overlapped stage overrides both.
  virtual void queue_on_device() {}
  // Waits, under the timeout, for what queue_on_device() left queued (before the step reads its results back).
  virtual void wait_queued() {}

  const ReductionStats& stats() const { return stats_; }
  comm::Communicator& group() const { return group_; }

 protected:
  // `group` (the data-parallel ranks) and `params` must outlive the reducer.
  GradientReducer(comm::Communicator& group, ParameterStore& params) : group_(group), params_(params) {}

  // The stage's work at finish(); the time it takes is the exposed time.
  virtual void reduce() = 0;
  // An all-reduce (average) of `gradients` on `comm`, counted and timed into the statistics.
  void average(comm::Communicator& comm, const Tensor& gradients);

  comm::Communicator& group_;
  ParameterStore& params_;
  ReductionStats stats_;
};

// The reducer of `stage` over `group`; `bucket_bytes` sizes the buckets of stages 2 and 3.
std::unique_ptr<GradientReducer> make_gradient_reducer(DpStage stage, comm::Communicator& group, ParameterStore& params,
                                                       int64_t bucket_bytes);

}  // namespace lab::dist
