// The one-pass flash backward (flash_attention_one_pass.cu), which flash_attention.cu's backward runs for
// FlashBackward::OnePass: bf16 or f16 qkv of a head size up to 128, shapes checked by the caller, not empty.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops::cuda {

void flash_attention_backward_one_pass(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                       const Tensor& lse, int n_head, GradWrite dqkv_write);

}  // namespace lab::ops::cuda
