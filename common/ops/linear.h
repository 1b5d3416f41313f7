// Linear layer: a GEMM plus bias, in PyTorch's layout (weight is [out_features, in_features]).
//   forward:  out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]           (bias may be undefined)
//   backward: dinp[N,C] += dout @ weight;  dweight[OC,C] += dout^T @ inp;  dbias[OC] += sum_n dout[n,:]
// Any leading dims of inp/out are flattened into N. Backward outputs that are undefined Tensors are skipped.
// All accumulate (+=), so gradients of shared weights (GPT-2's tied LM head) simply add up; each may be written over
// instead, for the first gradient of an input (grad_write.h): dinp by `dinp_write` Overwrite (dinp = dout @ weight,
// its old contents never read), dweight and dbias together by `dparams_write` Overwrite (a training step's first
// contribution to the layer's parameters: ag::parameter_gradients).
//
// Low precision (chapter 6's mixed precision): inp and weight may both be bf16 or both f16; bias, dout and the
// gradients stay f32, and out is f32 or the inputs' 16-bit type. The products then read 16-bit inputs and
// accumulate in fp32 (cuBLASLt with 16-bit A and B on CUDA; fp32 copies of the 16-bit values and the fp32 GEMM on
// the CPU, which rounds the same way); a 16-bit out is that fp32 sum plus the bias, rounded once when stored.
// f32 inputs give an f32 out. A 16-bit out may take its bias in its own 16-bit type too: the bias rounded to 16 bits
// as the weights are (what PyTorch's autocast does), which on CUDA lets one cuBLASLt matmul add it in its epilogue
// and store the 16-bit out itself (cuBLASLt's bias has D's type); the fp32 sum then starts from the widened bias.
// Backward rounds dout to the inputs' 16-bit type for its two products, as a GPU's 16-bit GEMM reads both
// operands in 16 bits (this is where small fp16 gradients vanish without loss scaling, and large ones
// overflow to inf); the bias gradient sums the fp32 dout.
// Activations in 16 bits end to end: dout (and dinp) may be in the inputs' 16-bit type too. dout is then read as it
// is, dinp += dout @ weight is summed in fp32 onto the widened dinp and rounded once when stored, and dweight and
// dbias stay f32 (the parameters' gradients).
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write = GradWrite::Add,
                     GradWrite dparams_write = GradWrite::Add);
// Rows [row_begin, row_begin + R) of the weight's gradient alone, fp32 (dweight_rows [R, C]):
//   dweight_rows += dout[:, row_begin : row_begin + R]^T @ inp
// what linear_backward adds to those rows, for a caller that reduces a large weight's gradient piece by piece
// without ever making it whole (chapter 7: ZeRO's tied embedding).
void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin);

namespace cpu {
void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write, GradWrite dparams_write);
void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin);
}  // namespace cpu
namespace cuda {
void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias);
void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write, GradWrite dparams_write);
void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin);
}  // namespace cuda

}  // namespace lab::ops
