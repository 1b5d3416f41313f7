// Causal multi-head self-attention with the softmax matrix materialised, as attention.h computes it, but with
// 16-bit storage: the middle rung between attention.h (f32 throughout, fp32 GEMMs on CUDA cores) and
// flash_attention.h (no T x T matrix at all). On CUDA its four kinds of product are cuBLASLt matmuls with 16-bit
// operands and fp32 accumulation, which run on tensor cores, batched over the heads.
//   qkv [B,T,3C] holds q, k, v side by side, each [B,T,NH,HS] with HS = C/NH (as attention.h).
//   forward:  probs[b,h,t,:] = softmax_{s<=t}(q[b,t,h,:] . k[b,s,h,:] / sqrt(HS)), zero for s > t  [B,NH,T,T]
//             out[b,t,h,:]   = sum_s probs[b,h,t,s] v[b,s,h,:]                                 [B,T,C]
//   backward: dqkv += gradient through both matmuls and the softmax   (accumulates; GradWrite::Overwrite: dqkv =)
// qkv, out, probs, dout and dqkv share one dtype. bf16 and f16 take the path below; f32 is ops::attention_forward
// and ops::attention_backward themselves, so the op takes every float dtype.
//
// Where the 16-bit path rounds (u = 2^-8 for bf16, 2^-11 for f16: half the gap above 1), per batch row and head:
//   forward   S  = scale q k^T     16-bit q, k; fp32 accumulation, scaled in fp32; S kept in fp32 (a workspace)
//             P  = causal softmax of S, in fp32 (mask, max, exp, sum, normalise: one kernel) -> stored rounded (probs)
//             out = P v            the rounded P and 16-bit v; fp32 accumulation        -> stored rounded
//   backward  dP  = dout v^T       16-bit dout, v; fp32 result (a workspace), not rounded
//             dv += P^T dout       fp32 accumulation, the sum with dv's old value rounded once
//             dS  = scale P (dP - rowsum(P dP)), in fp32                                -> rounded (a workspace)
//             dq += dS k,  dk += dS^T q    as dv
// So out carries the rounding of P (relative u on each weight) and its own; dqkv carries those of P and dS and
// the rounding of each sum into the 16-bit dqkv. The CPU backend rounds at the same points (with f32 arithmetic
// between them), so the two backends agree to within a 16-bit ulp where a value falls near a rounding boundary.
//
// Memory: probs, kept for the backward, is B*NH*T*T 16-bit values, half the f32 path's. On CUDA the workspaces
// live for one call and hold one batch row: the forward's scores NH*T*T fp32, the backward's dP (fp32) and dS
// (16-bit), NH*T*T each. The CPU backend's scratch is two T*T and five T*HS fp32 buffers per thread.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head);
void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write = GradWrite::Add);

// The backends take bf16 and f16 only (the public ops send f32 to attention.h).
namespace cpu {
void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head);
void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write);
}  // namespace cpu
namespace cuda {
void batched_attention_forward(const Tensor& out, const Tensor& probs, const Tensor& qkv, int n_head);
void batched_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                                int n_head, GradWrite dqkv_write);
}  // namespace cuda

}  // namespace lab::ops
