// The LayerNorm lab's own GPU versions (layernorm.cu), with the signatures of common/ops/layernorm.h: v1 (one
// thread per row) and v3 (the row in registers, float4). v2 is the core's op (ops::cuda::layernorm_*) and v4
// the promoted fused residual + LayerNorm (ch06_single_gpu/fused_residual_layernorm.h).
// The callers check shapes (as ops::layernorm_* do); CUDA tensors only.
#pragma once

#include "common/core/tensor.h"

namespace lab::ch06::layernorm_lab {

void forward_v1(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                const Tensor& b);
void backward_v1(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                 const Tensor& w, const Tensor& mean, const Tensor& rstd);

// Error(Unsupported) unless C is a multiple of 4 up to 1664 and the rows are 16-byte aligned.
void forward_v3(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                const Tensor& b);
void backward_v3(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                 const Tensor& w, const Tensor& mean, const Tensor& rstd);

}  // namespace lab::ch06::layernorm_lab
