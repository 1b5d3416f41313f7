// The chapter's promoted ops as differentiable functions (the form common/autograd/functions.h gives the core's
// ops), so that a GPT-2 can run them in its forward and backward: what --kernels fused plugs into the model.
//
//   fused_mlp             c_proj(gelu(c_fc(x))) with c_fc's GEMM, bias and GELU as one op
//                         (ch06::matmul_bias_gelu: the cuBLASLt epilogue on CUDA), c_proj a plain linear
//   residual_layernorm    h = a + b and layernorm(h) as one op (ch06::fused_residual_layernorm)
//   fused_cross_entropy   ag::cross_entropy through ch06::fused_classifier (online softmax on CUDA, the logits in
//                         any float dtype)
//
// Each computes what the reference functions compute, to rounding: the fused model's tests hold the logits,
// loss and every gradient to the reference model's (tests/ch06_single_gpu/fused_model/). The fused kernels of
// residual_layernorm take f32 activations: with 16-bit activations (ModelOptions::activations) it runs the
// reference functions, as fused_mlp does with 16-bit matmuls; fused_cross_entropy takes 16-bit logits as they are.
#pragma once

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/nn/modules.h"
#include "common/ops/grad_scale.h"

namespace lab::ch06 {

// The MLP's output for x [..., C]; c_fc's pre-GELU values are kept for the backward (as the reference keeps
// c_fc's output), so the GELU's backward needs no recomputation of the GEMM. A model with 16-bit matmul operands
// (GPT2::set_matmul_dtype) runs the reference MLP: the fused GEMM takes fp32 operands here.
Var fused_mlp(Tape& tape, const MLP& mlp, const Var& x);

struct ResidualNorm {
  Var residual;    // a + b
  Var normalized;  // layernorm(a + b) with ln's weight and bias
};
// Both outputs are Vars: `residual` goes on along the residual stream, `normalized` into the next sub-layer.
// The backward runs once both gradients are complete (the residual's other reader runs later in the forward,
// so earlier in the backward).
ResidualNorm residual_layernorm(Tape& tape, const Var& a, const Var& b, const LayerNorm& ln);

// ag::cross_entropy's contract (common/autograd/functions.h), word for word.
Tensor fused_cross_entropy(Tape& tape, const Var& logits, const Tensor& targets, int64_t vocab,
                           const ops::GradScale& grad_scale);

}  // namespace lab::ch06
