// The LayerNorm's 16-byte-piece kernels (layernorm.cu) with the residual add before it folded in, for chapter 6's
// fused residual + LayerNorm (ch06_single_gpu/fused_residual_layernorm.h) in 16 bits. Shapes, dtypes and devices
// checked by the caller (as ops::layernorm_forward / layernorm_backward check them); each returns false, with
// nothing queued, where the rows do not split into 16-byte pieces (the caller then runs the unfused ops).
//
//   residual_layernorm_forward_in_pieces   sum = a + b (each element rounded to the dtype, as residual_forward
//                                          rounds it), out, mean, rstd = layernorm(sum) from the registers: the
//                                          bits of residual_forward followed by layernorm_forward, sum written once
//                                          and never read back
//   layernorm_backward_in_pieces           layernorm_backward, and dx's new values written into dx_copy as well
//                                          (when defined): the residual add's second input's gradient, which the
//                                          add's backward would copy from dx
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops::cuda {

bool residual_layernorm_forward_in_pieces(const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                          const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias);
bool layernorm_backward_in_pieces(const Tensor& dx, const Tensor& dx_copy, const Tensor& dw, const Tensor& db,
                                  const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, GradWrite dx_write, GradWrite dparams_write);

}  // namespace lab::ops::cuda
