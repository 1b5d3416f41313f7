// The attention lab's own CUDA version (flash_backward_atomic.cu), with the signature of
// ops::flash_attention_backward: v5, the flash backward in one pass over key tiles with dQ added by f32 atomics,
// as FlashAttention-2 does it, against the core's two passes (v4; common/ops/cuda/flash_attention.cu says why the
// core makes the other choice). bf16 and f16, head sizes up to 128; the caller checks shapes (as the op does);
// CUDA tensors only.
#pragma once

#include "common/core/tensor.h"

namespace lab::ch09::attention_lab {

void flash_backward_atomic_dq(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head);

}  // namespace lab::ch09::attention_lab
