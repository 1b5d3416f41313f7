// The tensor-parallel step's gradient norm (see tensor_parallel_step.h).
#include "ch08_distributed/tp/tensor_parallel_step.h"

#include "ch08_distributed/tp/gradient_norm.h"
#include "common/core/error.h"

namespace lab::ch08::tp {

void TensorParallelStep::compute_gradient_norm() {
  write_gradient_norm(model_parallel_sum_squares(model(), context_));
}

std::string TensorParallelStep::capture_blocker() const {
  if (std::string why = dist::DataParallelStep::capture_blocker(); !why.empty()) return why;
  const comm::Communicator& tp = context_.tp();
  if (tp.size() > 1 && !tp.can_queue())
    return cat("tensor parallelism over the ", tp.backend(),
               " backend completes each all-reduce on the host (NCCL queues them on the stream)");
  return "";
}

void TensorParallelStep::prepare_capture() {
  dist::DataParallelStep::prepare_capture();
  if (context_.tp().can_queue()) context_.tp().set_queued(true);
}

void TensorParallelStep::before_read_back() {
  context_.tp().wait_queued();
  dist::DataParallelStep::before_read_back();
}

}  // namespace lab::ch08::tp
