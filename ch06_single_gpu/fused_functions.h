// The chapter's promoted ops as differentiable functions (the form common/autograd/functions.h gives the core's
// ops), so that a GPT-2 can run them in its forward and backward: what --kernels fused plugs into the model.
//
//   fused_mlp             c_proj(gelu(c_fc(x))) with c_fc's GEMM, bias and GELU as one op
//                         (ch06::matmul_bias_gelu: the cuBLASLt epilogue on CUDA), and in backward GELU's
//                         backward in the epilogue of the GEMM that gives its output's gradient (cuBLASLt's DGELU)
//   residual_layernorm    h = a + b and layernorm(h) as one op (ch06::fused_residual_layernorm)
// (The third, the classifier, plugs in as a kernel, ModelOptions::classifier = ch06::fused_classifier: the core's
// ag::cross_entropy_through runs it.)
//
// Each computes what the reference functions compute, to rounding: the fused model's tests hold the logits,
// loss and every gradient to the reference model's (tests/ch06_single_gpu/fused_model/). All three take 16-bit
// activations (ModelOptions::activations) as they are; residual_layernorm's are then the core LayerNorm's 16-byte-piece
// kernels with the add folded in, which give the reference functions' bits (fused_residual_layernorm.h).
#pragma once

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/nn/modules.h"
#include "common/ops/grad_scale.h"

namespace lab::ch06 {

// The MLP's output for x [..., C], one differentiable function for both layers:
//   forward   hidden = gelu(x @ c_fc^T + b) and its input pre_gelu from one GEMM (the GELU_AUX_BIAS epilogue),
//             then out = hidden @ c_proj^T + b (the core's linear, bias in its epilogue)
//   backward  c_proj's weight and bias gradients; then dpre = (dout @ c_proj) * gelu'(pre_gelu) from one GEMM (the
//             DGELU epilogue): the gradient of hidden is never written, read back, or zeroed; then c_fc's backward
// It keeps what the reference MLP keeps: x, hidden (c_proj's input) and pre_gelu (c_fc's output); with
// options.recompute_gelu (selective recompute, chapter 7) x and pre_gelu only, and backward computes hidden again
// from pre_gelu (ops::gelu_forward: a GELU kernel and a 4C-wide temporary, instead of keeping it). Under mixed
// precision (GPT2::set_matmul_dtype) the products read the weights' 16-bit copies and x, hidden and dout rounded to
// their type, as low_precision_linear.h does; with 16-bit activations these are already in it, hidden, pre_gelu
// and out are stored in 16 bits, and each layer's 16-bit out adds the 16-bit copy of its bias. Against the
// reference, the epilogues round differently: GELU is applied to the unrounded sum, and dpre is the fp32 product
// times gelu' rounded once, where the reference rounds dout @ c_proj to 16 bits first (a 16-bit ulp or so apart).
Var fused_mlp(Tape& tape, const MLP& mlp, const Var& x, const ModelOptions& options);

struct ResidualNorm {
  Var residual;    // a + b
  Var normalized;  // layernorm(a + b) with ln's weight and bias
};
// Both outputs are Vars: `residual` goes on along the residual stream, `normalized` into the next sub-layer.
// The backward runs once both gradients are complete (the residual's other reader runs later in the forward,
// so earlier in the backward). As ag::residual_into_stream, it is a pre-LN block's add: with 16-bit activations
// b's gradient is the sum's own buffer, which a's other readers (coming before b in the forward) add into later.
ResidualNorm residual_layernorm(Tape& tape, const Var& a, const Var& b, const LayerNorm& ln);

}  // namespace lab::ch06
