// AdamW on flat buffers (PyTorch semantics: decoupled weight decay, bias correction).
// For every element i of a contiguous buffer, with g = grads[i] * grad_scale:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr * ( (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + wd * p )
// where wd is hyper.weight_decay inside the decayed ranges and 0 elsewhere. grad_scale folds gradient clipping
// (and loss-scale removal) into the same pass over memory, as a number or read from device memory (GradScale).
// A grad_scale that is not finite skips the update: params, m, v and the 16-bit copy are left as they were. That is
// how a training step under loss scaling tells the update that it found inf/NaN gradients
// (ops::update_loss_scale) without the host deciding.
// params, grads, m, v: equal element counts, f32.
//
// Mixed precision keeps a 16-bit copy of the weights for its matmuls (GPT2::set_matmul_dtype), which every update
// changes. Given that copy (params_16bit: bf16 or f16, params' element count), the update also writes each updated
// parameter there, rounded to nearest even as ops::convert rounds it, in the same pass: the copy stays current
// without a conversion pass of its own, which would read the 4-byte parameters again.
//
// The decayed ranges are how a whole model's flat buffer is updated in one pass although its 2-D weights
// (decayed) and its biases and LayerNorm parameters (not decayed) alternate, as they do in backward order
// (common/nn/parameters.h). The form without ranges decays every element.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/core/tensor.h"
#include "common/ops/element_range.h"
#include "common/ops/grad_scale.h"

namespace lab::ops {

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based step count t, for bias correction
  // When defined, the update reads the values that change from step to step from this f32 tensor [3] on the
  // buffers' device instead of lr and step: lr, 1 - beta1^t, 1 - beta2^t (adamw_step_values), so that an update
  // captured in a CUDA graph replays with each step's values written there before the replay.
  Tensor step_values = Tensor();
};

// The values of one step that the update reads: lr, 1 - beta1^t, 1 - beta2^t, computed as the update computes
// them from lr and step (the bias corrections in double, rounded once to f32).
enum AdamWStepValue : int64_t { kStepLr, kStepBiasCorrection1, kStepBiasCorrection2, kStepValues };
std::vector<float> adamw_step_values(const AdamWHyper& hyper);

// `decay`: sorted, disjoint ranges inside [0, params.numel()) (InvalidArgument otherwise); `params_16bit`: undefined,
// or the 16-bit copy (above) on params' device.
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay,
                  const Tensor& params_16bit = Tensor());
// Every element decays with hyper.weight_decay.
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale);

namespace cpu {
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay,
                  const Tensor& params_16bit = Tensor());
inline void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                         const AdamWHyper& hyper, const GradScale& grad_scale) {
  cpu::adamw_update(params, grads, m, v, hyper, grad_scale, {{0, params.numel()}});
}
}  // namespace cpu
namespace cuda {
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay,
                  const Tensor& params_16bit = Tensor());
inline void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                         const AdamWHyper& hyper, const GradScale& grad_scale) {
  cuda::adamw_update(params, grads, m, v, hyper, grad_scale, {{0, params.numel()}});
}
}  // namespace cuda

}  // namespace lab::ops
