// The shape of causal multi-head self-attention's input, shared by the attention ops (attention.h,
// batched_attention.h, flash_attention.h) and their CPU backends: qkv [B,T,3C] holds q, k, v side by side, each
// [B,T,NH,HS] with HS = C/NH.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::ops {

struct AttentionDims {
  int64_t B, T, C, NH, HS;
  float scale;  // 1 / sqrt(HS), the scale of the scores

  // Nothing to compute: no batch rows, no positions or no channels.
  bool empty() const { return B == 0 || T == 0 || C == 0; }
};

// The sizes of qkv with n_head heads, unchecked: for the backends, whose public op has checked qkv.
AttentionDims attention_dims(const Tensor& qkv, int n_head);

// The public ops' check: qkv is three-dimensional (`what` names it) and its width is 3 * n_head * head_size
// (`op` names the op in the error); returns its sizes.
AttentionDims check_attention_qkv(const Tensor& qkv, int n_head, const char* what, const char* op);

}  // namespace lab::ops
