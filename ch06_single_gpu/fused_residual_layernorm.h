// The residual add fused with the LayerNorm that reads its result: GPT-2's  h = x + attn(ln_1(x));  ln_2(h)
// (and x + mlp(...) feeding the next block's ln_1) as one op, so that h is written once and never read back
// from memory for the normalisation. The promoted version of the LayerNorm lab (kernels/02_layernorm: v4 on
// CUDA, the one-pass loop on the CPU), for the trainer's --kernels fused.
//
//   forward:   residual = a + b;  out = layernorm(residual) * weight + bias;  mean, rstd saved   (eps 1e-5)
//   backward:  g = dresidual + d out/d residual . dout     (the LayerNorm input gradient, as ops::layernorm)
//              da += g;  db += g;  dweight += sum_n dout * xhat;  dbias += sum_n dout      (all accumulate;
//              dparams_write Overwrite: dweight = and dbias =, a training step's first contribution to them)
//
// `dresidual` is the gradient that reached `residual` from its other reader (the next residual add); it may
// be undefined (zero). da or db may be undefined (not wanted), and either may be dresidual itself: every
// element of the inputs is read before it is written, so both still receive dresidual's value from before
// the call (as common/ops/residual.h does).
// Shapes: a, b, residual, out, dout, dresidual, da, db [N, C] (leading dims flattened); weight, bias, dweight,
// dbias [C]; mean, rstd [N]; f32. Results match ops::residual_forward followed by ops::layernorm_forward (and
// their backwards) to rounding; dweight and dbias are summed in a fixed order on both backends (the same bits
// on every run).
//
// 16-bit activations (a, b, residual, out, dout and the [N, C] gradients bf16 or f16; weight, bias, their
// gradients, mean and rstd f32, as ops::layernorm has them): the forward takes them too, and the backward runs as
// fused_residual_layernorm_backward_through. On CUDA these are the core LayerNorm's 16-byte-piece kernels with the
// add folded in (common/ops/cuda/layernorm_pieces.h), which give the bits of the unfused ops: the sum is rounded to
// 16 bits as residual_forward stores it and normalised as stored. Rows that do not split into 16-byte pieces, and
// the CPU, run the core's unfused ops (the same bits by construction).
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ch06 {

void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write = ops::GradWrite::Add);
// The backward in the form the autograd function runs it with 16-bit activations (ag::pass_gradient_through hands
// the sum's gradient to the add's inputs; in the fused block both share it, so dcopy is undefined there, while a
// caller whose second input needs its own buffer passes it as dcopy): dsum, the sum's gradient, gets the
// LayerNorm's input gradient added (dsum_write Add: dsum holds the gradient from the sum's other reader) or written
// over it (Overwrite: a new buffer, not read); dcopy, when defined, receives dsum's new values from the same pass;
// dweight and dbias as dparams_write says. Any float dtype of the activations.
void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write = ops::GradWrite::Add);

namespace cpu {
void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write);
void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write);
}  // namespace cpu
namespace cuda {
void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias);
void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write);
void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write);
}  // namespace cuda

}  // namespace lab::ch06
