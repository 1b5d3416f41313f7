// A GEMM with its epilogue (bias, GELU) fused: the matmul lab's promoted version
// (ch06_single_gpu/kernels/01_matmul/), on Tensors.
//
//   matmul_bias_gelu(out, pre_gelu, inp, weight, bias):
//       out[..., OC] = gelu(inp[..., C] @ weight[OC, C]^T + bias[OC])
//
// GPT-2's c_fc and the GELU after it as one op, for a fused MLP (ModelOptions::mlp): the weight in the layout
// of a Linear ([out, in]). pre_gelu (optional; out's shape) receives inp @ weight^T + bias, the value GELU's
// backward needs, so a training step can keep it instead of recomputing it. bias may be undefined.
//
//   CUDA: one cuBLASLt matmul with the GELU_BIAS epilogue (GELU_AUX_BIAS with pre_gelu): bias and GELU are
//         applied to each tile of the product while it is in registers, so the output is written once and
//         never read back. Unfused, the GEMM writes it, and a bias + GELU kernel reads and writes it again.
//   CPU:  rows in blocks of 256, one block per thread at a time: the block's GEMM (bias folded in as its C),
//         then its GELU while the block is still in cache. On a CPU whose cache holds all of out, this only
//         ties with the unfused passes (measured: ch06_single_gpu/kernels/01_matmul/README.md).
//
// dtypes: inp and weight f32, bf16 or f16 (the same); out, pre_gelu and bias f32 or the inputs' dtype (all the
// same). fp32 inputs follow the TF32 switch of common/cuda/cublas.h on CUDA; 16-bit inputs accumulate in fp32.
// GELU is the tanh approximation (common/ops/gelu.h); cuBLASLt's may differ from the CPU's in the last bits.
//
// matmul_epilogue() is the general form both the op and the matmul lab use: any of the epilogues, and B in
// either layout. Its GeluGrad epilogue is GELU's backward on a GEMM (cuBLASLt's DGELU): the product that gives the
// gradient of a GELU's output, multiplied by GELU's derivative at the input pre_gelu kept, so that the gradient
// of GELU's input is written once and the output's gradient is never stored (the fused MLP's backward,
// ch06_single_gpu/fused_functions.h).
#pragma once

#include "common/core/tensor.h"

namespace lab::ch06 {

void matmul_bias_gelu(const Tensor& out, const Tensor& pre_gelu, const Tensor& inp, const Tensor& weight,
                      const Tensor& bias);

enum class Epilogue { None, Bias, Gelu, BiasGelu, GeluGrad };
const char* epilogue_name(Epilogue epilogue);  // "none", "bias", "gelu", "bias+gelu", "dgelu"

// out[M,N] = epilogue(a[M,K] @ op(b)), row-major, where op(b) is b[K,N], or b^T for b[N,K] when b_transposed
// (the layout of a Linear's weight). bias[N] is read by the Bias epilogues (and must be undefined for the
// others); pre_gelu[M,N] (optional, Gelu and BiasGelu) receives the value before the GELU. K > 0.
// GeluGrad: out = (a @ op(b)) * gelu'(pre_gelu), pre_gelu (required) read, no bias.
void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue);

namespace cpu {
void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue);
}  // namespace cpu
namespace cuda {
void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue);
}  // namespace cuda

}  // namespace lab::ch06
