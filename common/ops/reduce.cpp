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

void accumulate_sum(const Tensor& total, const Tensor& x, double weight) {
  x.check_dtype(DType::F32, "accumulate_sum");
  total.check_dtype(DType::F32, "accumulate_sum total");
  LAB_CHECK(total.numel() >= 1, InvalidArgument, "accumulate_sum: an empty total");
  check_same_device({&x, &total}, "accumulate_sum");
  LAB_DISPATCH(x.device(), accumulate_sum, total, x, weight);
}

void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale) {
  grads.check_dtype(DType::F32, "gradient_norm_and_scale");
  out.check_dtype(DType::F32, "gradient_norm_and_scale out");
  LAB_CHECK(out.numel() >= 2, InvalidArgument, "gradient_norm_and_scale: out holds ", out.numel(), " elements, not 2");
  LAB_CHECK(loss_scale.value > 0, InvalidArgument, "gradient_norm_and_scale: loss scale ", loss_scale.value);
  loss_scale.check("gradient_norm_and_scale loss scale");
  check_same_device({&grads, &out, &loss_scale.on_device}, "gradient_norm_and_scale");
  LAB_DISPATCH(grads.device(), gradient_norm_and_scale, out, grads, max_norm, loss_scale);
}

void accumulate_sum_squares(const Tensor& total, const Tensor& x) {
  x.check_dtype(DType::F32, "accumulate_sum_squares");
  total.check_dtype(DType::F32, "accumulate_sum_squares total");
  LAB_CHECK(total.numel() >= 1, InvalidArgument, "accumulate_sum_squares: an empty total");
  check_same_device({&x, &total}, "accumulate_sum_squares");
  LAB_DISPATCH(x.device(), accumulate_sum_squares, total, x);
}

void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale) {
  sum_squares.check_dtype(DType::F32, "norm_and_scale sum of squares");
  out.check_dtype(DType::F32, "norm_and_scale out");
  LAB_CHECK(sum_squares.numel() >= 1, InvalidArgument, "norm_and_scale: an empty sum of squares");
  LAB_CHECK(out.numel() >= 2, InvalidArgument, "norm_and_scale: out holds ", out.numel(), " elements, not 2");
  LAB_CHECK(loss_scale.value > 0, InvalidArgument, "norm_and_scale: loss scale ", loss_scale.value);
  loss_scale.check("norm_and_scale loss scale");
  check_same_device({&sum_squares, &out, &loss_scale.on_device}, "norm_and_scale");
  LAB_DISPATCH(out.device(), norm_and_scale, out, sum_squares, max_norm, loss_scale);
}

}  // namespace lab::ops
