// Token + position embedding (GPT-2's encoder).
//   forward:  out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]
//   backward: dwte[tokens[b,t], :] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:]   (accumulates)
// Shapes: tokens [B,T] i32, wte [Vp,C], wpe [maxT,C] with T <= maxT, out/dout [B,T,C]; all floats f32.
// The CPU backend rejects token ids outside [0, Vp) with InvalidArgument.
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens);

namespace cpu {
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens);
}  // namespace cpu
namespace cuda {
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens);
}  // namespace cuda

}  // namespace lab::ops
