// Linear layer: a GEMM plus bias, in PyTorch's layout (weight is [out_features, in_features]).
//   forward:  out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]           (bias may be undefined)
//   backward: dinp[N,C] += dout @ weight;  dweight[OC,C] += dout^T @ inp;  dbias[OC] += sum_n dout[n,:]
// Any leading dims of inp/out are flattened into N. Backward outputs that are undefined Tensors are skipped.
// All accumulate (+=), so gradients of shared weights (GPT-2's tied LM head) simply add up.
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight);

namespace cpu {
void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight);
}  // namespace cpu
namespace cuda {
void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight);
}  // namespace cuda

}  // namespace lab::ops
