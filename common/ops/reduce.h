// Reductions that end on the host: the sum of squares (for the global gradient norm) and the sum
// (for the mean loss). Both accumulate in double on the CPU; the CUDA backend accumulates in float
// per block and in double across blocks. The result is returned to the host (a device sync).
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

double sum_squares(const Tensor& x);
double sum(const Tensor& x);

namespace cpu {
double sum_squares(const Tensor& x);
double sum(const Tensor& x);
}  // namespace cpu
namespace cuda {
double sum_squares(const Tensor& x);
double sum(const Tensor& x);
}  // namespace cuda

}  // namespace lab::ops
