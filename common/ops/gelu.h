// GELU, tanh approximation (GPT-2's):  gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   forward:  out = gelu(x)
//   backward: dx += gelu'(x) * dout          (accumulates; with dx_write Overwrite, dx = ..., dx never read)
// Both backends evaluate it as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), the same function:
// 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)). Written with tanh, 1 + tanh(u) cancels for x below about -4 (tanh is
// -1 to within its own rounding), and float results there lose every digit; the sigmoid form keeps a
// relative error of a few 1e-6 over the whole range.
// Any shape; all tensors the same number of elements and the same dtype: f32, or bf16 / f16 stored with fp32
// arithmetic inside (each result rounded once, when stored; dx's sum too).
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write = GradWrite::Add);

namespace cpu {
void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write);
}  // namespace cpu
namespace cuda {
void gelu_forward(const Tensor& out, const Tensor& x);
void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write);
}  // namespace cuda

}  // namespace lab::ops
