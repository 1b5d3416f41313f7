// The tensor-parallel step's gradient norm (see tensor_parallel_step.h).
#include "ch08_distributed/tp/tensor_parallel_step.h"

#include "ch08_distributed/tp/gradient_norm.h"

namespace lab::ch08::tp {

void TensorParallelStep::compute_gradient_norm() {
  write_gradient_norm(model_parallel_sum_squares(model(), context_));
}

}  // namespace lab::ch08::tp
