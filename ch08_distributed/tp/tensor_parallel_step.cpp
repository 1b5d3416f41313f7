// The tensor-parallel step's gradient norm (see tensor_parallel_step.h).
#include "ch08_distributed/tp/tensor_parallel_step.h"

#include "ch08_distributed/tp/gradient_norm.h"

namespace lab::ch08::tp {

void TensorParallelStep::compute_gradient_norm() {
  write_gradient_norm(model_parallel_sum_squares(model(), context_));
}

std::string TensorParallelStep::capture_blocker() const {
  if (std::string why = dist::DataParallelStep::capture_blocker(); !why.empty()) return why;
  return context_.tp().capture_blocker("tensor parallelism's all-reduces");
}

void TensorParallelStep::prepare_capture() {
  dist::DataParallelStep::prepare_capture();
  context_.tp().queue_where_able();
}

void TensorParallelStep::before_read_back() {
  context_.tp().wait_queued();
  dist::DataParallelStep::before_read_back();
}

}  // namespace lab::ch08::tp
