// GELU, tanh approximation (GPT-2's):  gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   forward:  out = gelu(x)
//   backward: dx += gelu'(x) * dout                                       (accumulates)
// Any shape; all tensors the same number of elements; f32.
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout);

namespace cpu {
void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout);
}  // namespace cpu
namespace cuda {
void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout);
}  // namespace cuda

}  // namespace lab::ops
