// Causal multi-head self-attention, the straightforward way (the softmax matrix is materialised;
// chapter 9 replaces it with flash attention).
//   qkv [B,T,3C] holds q, k, v side by side, each [B,T,NH,HS] with HS = C/NH.
//   forward:  att[b,h,t,:] = softmax_{s<=t}(q[b,t,h,:] . k[b,s,h,:] / sqrt(HS)), zero for s > t
//             out[b,t,h,:] = sum_s att[b,h,t,s] v[b,s,h,:]                  out [B,T,C], att [B,NH,T,T]
//   backward: dqkv += gradient through both matmuls and the softmax        (accumulates; with
//             GradWrite::Overwrite, dqkv = the gradient, dqkv not read: each of dq, dk, dv is one product's
//             output, so its GEMM runs with beta = 0)
// f32. The backward may allocate workspace from the device allocator.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head);
void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write = GradWrite::Add);

namespace cpu {
void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head);
void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write);
}  // namespace cpu
namespace cuda {
void attention_forward(const Tensor& out, const Tensor& att, const Tensor& qkv, int n_head);
void attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& att, int n_head,
                        GradWrite dqkv_write);
}  // namespace cuda

}  // namespace lab::ops
