// LayerNorm over the last dimension (eps = 1e-5, GPT-2's value).
//   forward:  mean[n], rstd[n] = 1/sqrt(var[n] + eps);  out[n,:] = (x[n,:] - mean[n]) * rstd[n] * w + b
//   backward: dx += ..., dw += sum_n dout * xhat, db += sum_n dout          (all accumulate; with dx_write
//             Overwrite, dx = ..., dx never read; with dparams_write Overwrite, dw = and db =, for a training
//             step's first contribution to them: ag::parameter_gradients)
// Shapes: x/out/dout/dx [N,C] (leading dims flattened), w/b/dw/db [C], mean/rstd [N].
// Dtypes: the activations x, out, dout and dx share one float dtype, f32 or bf16 / f16 stored with fp32 arithmetic
// inside (each element of out and dx rounded once, when stored; dx's sum too). Everything else is f32 whatever the
// activations are: w, b, dw and db because parameters and their gradients are the fp32 master copies the
// optimizer updates (dw and db sum over all N rows, which 16-bit storage would round away), mean and rstd because
// they are saved statistics the backward reuses, not activations.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

inline constexpr float kLayerNormEps = 1e-5f;

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b);
void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write = GradWrite::Add,
                        GradWrite dparams_write = GradWrite::Add);

namespace cpu {
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b);
void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write,
                        GradWrite dparams_write);
}  // namespace cpu
namespace cuda {
void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b);
void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write,
                        GradWrite dparams_write);
}  // namespace cuda

}  // namespace lab::ops
