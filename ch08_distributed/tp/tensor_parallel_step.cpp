// The tensor-parallel step's gradient norm (see tensor_parallel_step.h).
#include "ch08_distributed/tp/tensor_parallel_step.h"

#include "ch08_distributed/tp/gradient_norm.h"

namespace lab::ch08::tp {

double TensorParallelStep::gradient_norm() {
  return model_parallel_gradient_norm(model(), context_);
}

}  // namespace lab::ch08::tp
