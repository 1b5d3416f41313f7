// The attention lab's own CUDA versions, with the signatures of ops::flash_attention_forward and _backward. bf16
// and f16, head sizes up to 128; the caller checks shapes (as the op does); CUDA tensors only.
//   v4 (flash_wmma.cu)             flash attention through WMMA, every score and running output in shared memory:
//                                  the core's op before v6.
//   v5 (flash_backward_atomic.cu)  the backward in one pass over key tiles with dQ added by f32 atomics, as
//                                  FlashAttention-2 does it, against the two passes of v4 and v6
//                                  (common/ops/cuda/flash_attention.cu says why the core makes the other choice).
//   v6 (flash_registers.cu)        mma.sync with the fragments in registers (FlashAttention-2's layout), each
//                                  tile loaded and waited for before it is multiplied: the core's op before v7.
//   v14 (flash_wgmma.cu)           v7's forward with its products on Hopper's warpgroup instructions (wgmma,
//                                  sm_90a), operands read by the tensor cores from shared memory; v15 with
//                                  the softmax of one tile beside the tensor cores' work on the previous.
// v7 is the core's op itself (common/ops/cuda/flash_attention.cu: v6 with the next tile copied by cp.async while
// the current one is multiplied, and the causal mask on the diagonal tiles only); v8 is the core's batched op; v9
// is the core's one-pass backward (common/ops/cuda/flash_attention_one_pass.cu: v5's one pass with dQ by f32
// atomics, on v7's kernels), the trainer's --attention flash-one-pass; v11, v12 and v13 are the core's op with its
// 128-row kernel sets (ops::FlashTiles::Rows128 and Rows128Steps16: common/ops/cuda/flash_attention_forward.cuh and
// flash_attention_backward.cuh).
#pragma once

#include "common/core/tensor.h"

namespace lab::ch09::attention_lab {

void flash_wmma_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
void flash_wmma_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                         const Tensor& lse, int n_head);

void flash_registers_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
void flash_registers_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head);

// v14, forward only. flash_wgmma_runs_here: whether it can run (the emulator, or a compute capability 9.0 GPU with
// this build compiled for sm_90a); the forward fails with Unsupported where it cannot.
bool flash_wgmma_runs_here();
void flash_wgmma_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
// v15, forward only: v14 with each tile's softmax computed while the tensor cores run the previous tile's P V.
void flash_wgmma_overlapped_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);

void flash_backward_atomic_dq(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head);

}  // namespace lab::ch09::attention_lab
