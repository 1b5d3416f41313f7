// A Linear layer under mixed precision (chapter 6): the product reads 16-bit operands and accumulates in fp32.
//
//   forward:   out = round(x) @ weight_16bit^T + bias       (out, bias fp32; round: to weight_16bit's dtype)
//   backward:  dx += round(dout) @ weight_16bit;  dweight += round(dout)^T @ round(x);  dbias += sum dout
//
// weight_16bit is the bf16 or fp16 copy of the fp32 parameter `weight` (GPT2 keeps it in a flat buffer, which
// every optimizer step rounds anew); the gradient goes to the fp32 parameter, and AdamW updates the fp32
// master weights. Every product therefore sees exactly what a GPU's 16-bit GEMM sees (common/ops/linear.h).
//
// What is kept for backward: the handles of x, weight and bias, as in the fp32 layer. The input is rounded
// again in backward instead of keeping a 16-bit copy from the forward pass: the tape's Var holds x's fp32
// value until x's own producer has run its backward anyway, so a 16-bit copy would add memory, not save it
// (the same rounding gives the same 16-bit values).
//
// Activations in 16 bits end to end (ModelOptions::activations): x already has weight_16bit's dtype, so nothing is
// rounded, out is written in that dtype (the fp32 sum plus the bias, rounded once), and backward reads a 16-bit
// dout and adds a 16-bit dx (common/ops/linear.h). The bias added is then bias_16bit, the 16-bit copy of the bias,
// where the model gives one (as PyTorch's autocast rounds a linear layer's bias with its weight): on CUDA the
// product, the bias and the 16-bit store are then one cuBLASLt matmul (its bias has the output's type).
#pragma once

#include "common/autograd/tape.h"

namespace lab {

Var low_precision_linear(Tape& tape, const Var& x, const Var& weight, const Tensor& weight_16bit, const Var& bias,
                         const Tensor& bias_16bit = Tensor());

// The two choices above, for a layer that runs its products itself (chapter 6's fused MLP):
//   matmul_operand   x as a product with `dtype` operands reads it: x itself when it has that dtype, otherwise x
//                    rounded to it (a workspace temporary)
//   bias_for_output  the bias an output of `out_dtype` adds: bias_16bit when it has out's 16-bit type, the fp32
//                    bias otherwise (undefined when there is none)
Tensor matmul_operand(const Tensor& x, DType dtype);
Tensor bias_for_output(const Var& bias, const Tensor& bias_16bit, DType out_dtype);

}  // namespace lab
