// The part every stage shares: statistics, timing and the factory (see gradient_reducer.h).
#include "common/dist/gradient_reducer.h"

#include <algorithm>

#include "common/bench/timer.h"
#include "common/dist/stage1_naive.h"
#include "common/dist/stage2_bucketed.h"
#include "common/dist/stage3_overlapped.h"

namespace lab::dist {

double ReductionStats::overlap_fraction() const {
  if (comm_seconds <= 0) return 0;
  return std::clamp(1.0 - exposed_seconds / comm_seconds, 0.0, 1.0);
}

void GradientReducer::before_last_backward() {
  stats_ = {};
}

void GradientReducer::finish() {
  const bench::Timer timer;
  reduce();
  stats_.exposed_seconds = timer.seconds();
}

void GradientReducer::average(comm::Communicator& comm, const Tensor& gradients) {
  const bench::Timer timer;
  comm.all_reduce(gradients, comm::ReduceOp::Avg);
  stats_.comm_seconds += timer.seconds();
  stats_.collectives += 1;
  stats_.bytes += gradients.numel() * static_cast<int64_t>(dtype_size(gradients.dtype()));
}

std::unique_ptr<GradientReducer> make_gradient_reducer(DpStage stage, comm::Communicator& group, ParameterStore& params,
                                                       int64_t bucket_bytes) {
  switch (stage) {
    case DpStage::Naive: return std::make_unique<NaiveAllReduce>(group, params);
    case DpStage::Bucketed: return std::make_unique<BucketedAllReduce>(group, params, bucket_bytes);
    case DpStage::Overlap: return std::make_unique<OverlappedAllReduce>(group, params, bucket_bytes);
  }
  fail(ErrorKind::InvalidArgument, "unknown data-parallel stage");
}

}  // namespace lab::dist
