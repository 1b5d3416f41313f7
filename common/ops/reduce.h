// Reductions: the sum of squares (for the global gradient norm) and the sum (for the mean loss). Both accumulate
// in double on the CPU; the CUDA backend accumulates in float per block and in double across blocks, in block
// order, so a result is the same number on every GPU.
//
// sum_squares and sum return the result to the host (a device sync). The two below leave theirs in device memory
// for a training step that reads nothing back until it reports (common/train/train_step.h):
//   accumulate_sum(total, x, weight)            total[0] += weight * sum(x)   (the sum as sum() makes it, in double;
//                                               the total in f32)
//   gradient_norm_and_scale(out, grads, max_norm, loss_scale)
//                                               out[0] = sqrt(sum_squares(grads)) / loss_scale     (the norm)
//                                               out[1] = clip_scale(norm, max_norm, loss_scale) (below)
//                                               the numbers a host computes from sum_squares(), in the same double
//                                               arithmetic, so the update's bits do not depend on where they were
//                                               computed
//   accumulate_sum_squares(total, x)            total[0] += sum_squares(x)   (in double, the total in f32)
//   norm_and_scale(out, sum_squares, max_norm, loss_scale)
//                                               out as gradient_norm_and_scale writes it, from a sum of squares
//                                               already on the device (its first f32): the steps whose gradients
//                                               are split across ranks add their partial sums there (an
//                                               all-reduce of one float) instead of on the host
// total and out are f32 tensors of at least one and two elements, on the device of x and grads. The loss scale is a
// number, or one the training step keeps on the device (fp16's dynamic loss scaling), read by the kernel.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_scale.h"

namespace lab::ops {

double sum_squares(const Tensor& x);
double sum(const Tensor& x);
void accumulate_sum(const Tensor& total, const Tensor& x, double weight);
void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale);
void accumulate_sum_squares(const Tensor& total, const Tensor& x);
void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale);

// Global-norm clipping's factor: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off) or the norm
// is NaN.
inline float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  const double q = max_norm / (norm + 1e-6);
  return static_cast<float>(q < 1.0 ? q : 1.0);
}
// What the update multiplies the gradients by: the clipping factor, and 1 / the loss scale.
inline float clip_scale(double norm, double max_norm, double loss_scale) {
  return static_cast<float>(static_cast<double>(clip_coefficient(norm, max_norm)) / loss_scale);
}

namespace cpu {
double sum_squares(const Tensor& x);
double sum(const Tensor& x);
void accumulate_sum(const Tensor& total, const Tensor& x, double weight);
void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale);
void accumulate_sum_squares(const Tensor& total, const Tensor& x);
void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale);
}  // namespace cpu
namespace cuda {
double sum_squares(const Tensor& x);
double sum(const Tensor& x);
void accumulate_sum(const Tensor& total, const Tensor& x, double weight);
void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale);
void accumulate_sum_squares(const Tensor& total, const Tensor& x);
void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale);
}  // namespace cuda

}  // namespace lab::ops
