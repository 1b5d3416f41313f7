// The accurate reference of causal self-attention, forward and backward, in fp64: the oracle the attention lab
// and chapter 9's tests judge every version by (the CPU ops included).
//
// Row by row, straight from the definition (common/ops/attention.h): for query t of head h,
//   p_s = exp(scale q_t.k_s - lse_t) for s <= t,  lse_t = log sum_{s<=t} exp(scale q_t.k_s),  out_t = sum_s p_s v_s
// and the backward through the same row: dp_s = dout_t.v_s, D_t = sum_s p_s dp_s, ds_s = p_s (dp_s - D_t),
// dq_t += scale sum_s ds_s k_s, dk_s += scale ds_s q_t, dv_s += p_s dout_t. Every sum in double; O(T^2 HS) per
// head, no T x T buffer; parallel over (batch, head).
//
// With `rounding` bf16 or f16 it is instead the straightforward same-precision computation that the 16-bit
// versions are judged against (compare.h's low-precision rule): every product of a 16-bit tensor-core
// implementation reads 16-bit operands, so the probabilities p_s and the score gradients ds_s are rounded to
// `rounding` before they are multiplied, and out and the gradients are rounded to it at the end. Sums stay
// in fp64 (their rounding is not what 16 bits cost).
#pragma once

#include <cstdint>

#include "common/core/dtype.h"
#include "common/core/tensor.h"

namespace lab::ch09 {

struct AttentionShape {
  int64_t B = 1, T = 1, NH = 1, HS = 64;
  int64_t C() const { return NH * HS; }
};

struct ReferenceForward {
  Tensor out;  // [B,T,C] f32, rounded once from fp64
  Tensor lse;  // [B,NH,T] f32
};

// From qkv [B,T,3C] (any float dtype, any device: read as float values).
ReferenceForward reference_forward(const AttentionShape& shape, const Tensor& qkv, DType rounding = DType::F32);
// The gradient of sum(out * dout) with respect to qkv, [B,T,3C] f32 (not accumulated onto anything).
Tensor reference_backward(const AttentionShape& shape, const Tensor& qkv, const Tensor& dout,
                          DType rounding = DType::F32);

}  // namespace lab::ch09
