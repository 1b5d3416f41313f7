// per_tensor_adamw (adamw_versions.h): the core's op called once per tensor, the way a framework's optimizer
// that walks its parameter list does.
#include "ch06_single_gpu/kernels/05_adamw/adamw_versions.h"

namespace lab::ch06::adamw {

void per_tensor_adamw(const std::vector<TensorSet>& tensors, const ops::AdamWHyper& hyper, float grad_scale) {
  for (const TensorSet& t : tensors) {
    ops::AdamWHyper h = hyper;
    if (!t.decay) h.weight_decay = 0.0f;
    ops::adamw_update(t.params, t.grads, t.m, t.v, h, grad_scale);
  }
}

}  // namespace lab::ch06::adamw
