#include "common/ops/reduce.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

double sum_squares(const Tensor& x) {
  x.check_dtype(DType::F32, "sum_squares");
  const ProfiledOp profiled("sum_squares");  // as LAB_DISPATCH does for the ops that return nothing
#ifdef LAB_WITH_CUDA
  if (x.is_cuda()) return cuda::sum_squares(x);
#endif
  LAB_CHECK(x.is_cpu(), Unsupported, "sum_squares: CUDA tensor, but this build has no CUDA backend");
  return cpu::sum_squares(x);
}

double sum(const Tensor& x) {
  x.check_dtype(DType::F32, "sum");
  const ProfiledOp profiled("sum");
#ifdef LAB_WITH_CUDA
  if (x.is_cuda()) return cuda::sum(x);
#endif
  LAB_CHECK(x.is_cpu(), Unsupported, "sum: CUDA tensor, but this build has no CUDA backend");
  return cpu::sum(x);
}

}  // namespace lab::ops
