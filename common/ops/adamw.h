// AdamW on flat buffers (PyTorch semantics: decoupled weight decay, bias correction).
// For every element i of a contiguous range, with g = grads[i] * grad_scale:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr * ( (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * p )
// grad_scale folds gradient clipping (and loss-scale removal) into the same pass over memory.
// params, grads, m, v: equal element counts, f32.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::ops {

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based step count t, for bias correction
};

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale);

namespace cpu {
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale);
}  // namespace cpu
namespace cuda {
void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale);
}  // namespace cuda

}  // namespace lab::ops
