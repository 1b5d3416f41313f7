// Residual connection: out = a + b; its backward adds dout into both inputs' gradients.
//   forward:  out = a + b
//   backward: da += dout; db += dout   (either may be undefined; either may be dout itself, and both
//             still receive dout's value from before the call)
//   gradient_copy: dx = dout           (the backward of an input whose gradient starts here, nothing added to it
//             yet: a copy where the backward would add into zeros; on CUDA a kernel on the device's stream, with
//             no wait for the host, so a CUDA graph can hold it)
// Any shape, equal element counts, one dtype: f32, or bf16 / f16 stored with fp32 arithmetic inside (each result
// rounded once, when stored).
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b);
void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout);
void residual_gradient_copy(const Tensor& dx, const Tensor& dout);

namespace cpu {
void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b);
void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout);
void residual_gradient_copy(const Tensor& dx, const Tensor& dout);
}  // namespace cpu
namespace cuda {
void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b);
void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout);
void residual_gradient_copy(const Tensor& dx, const Tensor& dout);
}  // namespace cuda

}  // namespace lab::ops
