// The versions of the bias + GELU lab, each a function on Tensors. x is a GEMM's output without its bias
// ([N, OC], as the MLP's first Linear produces it), bias [OC]:
//   forward:   out = gelu(x + bias)
//   backward:  dx = gelu'(x + bias) * dout   (written: the gradient of the GEMM's output, which the weight and
//              input gradient GEMMs read next);  dbias += sum over rows of dx
// A version that keeps the pre-activation pre = x + bias (as the core's Linear + GELU do) writes it in its
// forward and reads it in its backward; one that does not recomputes it from x and bias.
//
// GPU versions (bias_gelu.cu, on the current stream of the tensors' device):
//   v1  separate kernels: the bias broadcast (pre = x + bias), then the core's GELU kernel; backward: GELU's
//       backward into dx, then the core's column sums re-reading dx for dbias
//   v2  one fused pass, float4: out = gelu(x + bias) per element; backward: dx and the dbias partial sums in
//       one kernel, then a small kernel adding the partial sums
//   v3  the GEMM's epilogue (the problem then includes the GEMM): cuBLASLt's GELU_AUX_BIAS epilogue applies
//       bias and GELU to each tile of the product while it is in registers (ch06::matmul_bias_gelu, the
//       matmul lab's promoted op). Its backward is a GEMM's too (CUBLASLT_EPILOGUE_DGELU on the product that
//       gives GELU's input gradient): --kernels fused's MLP runs it (ch06_single_gpu/fused_functions.h), and
//       this lab, which times bias + GELU without a GEMM, has no row for it.
// CPU versions (bias_gelu_cpu.cpp): separate passes over memory against one fused pass.
#pragma once

#include "common/core/tensor.h"

namespace lab::ch06::bias_gelu {

// ---------------------------------------------------------------- GPU
void forward_v1(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& bias);
void backward_v1(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& pre);
void forward_v2(const Tensor& out, const Tensor& x, const Tensor& bias);
void backward_v2(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& bias);

// ---------------------------------------------------------------- CPU
void cpu_forward_separate(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& bias);
void cpu_backward_separate(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& pre);
void cpu_forward_fused(const Tensor& out, const Tensor& x, const Tensor& bias);
void cpu_backward_fused(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& bias);

}  // namespace lab::ch06::bias_gelu
