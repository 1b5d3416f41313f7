// The residual add fused with the LayerNorm that reads its result: GPT-2's  h = x + attn(ln_1(x));  ln_2(h)
// (and x + mlp(...) feeding the next block's ln_1) as one op, so that h is written once and never read back
// from memory for the normalisation. The promoted version of the LayerNorm lab (kernels/02_layernorm: v4 on
// CUDA, the one-pass loop on the CPU), for the trainer's --kernels fused.
//
//   forward:   residual = a + b;  out = layernorm(residual) * weight + bias;  mean, rstd saved   (eps 1e-5)
//   backward:  g = dresidual + d out/d residual . dout     (the LayerNorm input gradient, as ops::layernorm)
//              da += g;  db += g;  dweight += sum_n dout * xhat;  dbias += sum_n dout      (all accumulate)
//
// `dresidual` is the gradient that reached `residual` from its other reader (the next residual add); it may
// be undefined (zero). da or db may be undefined (not wanted), and either may be dresidual itself: every
// element of the inputs is read before it is written, so both still receive dresidual's value from before
// the call (as common/ops/residual.h does).
// Shapes: a, b, residual, out, dout, dresidual, da, db [N, C] (leading dims flattened); weight, bias, dweight,
// dbias [C]; mean, rstd [N]; f32. Results match ops::residual_forward followed by ops::layernorm_forward (and
// their backwards) to rounding; dweight and dbias are summed in a fixed order on both backends (the same bits
// on every run).
#pragma once

#include "common/core/tensor.h"

namespace lab::ch06 {

void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd);

namespace cpu {
void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd);
}  // namespace cpu
namespace cuda {
void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd);
}  // namespace cuda

}  // namespace lab::ch06
