// AdamW over the flat buffers, the global gradient norm and clipping (see adamw.h).
#include "common/optim/adamw.h"

#include <algorithm>
#include <cmath>

#include "common/ops/reduce.h"

namespace lab {

AdamW::AdamW(ParameterStore& params, const AdamWConfig& config) : params_(params), config_(config) {
  LAB_CHECK(params.allocated(), InvalidArgument, "AdamW needs allocated parameters");
  MemoryScope scope(MemCategory::Optimizer);
  m_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
  v_ = Tensor::zeros({params.numel()}, DType::F32, params.device());
}

void AdamW::step(float lr, float grad_scale) {
  ++step_;
  const ops::AdamWHyper hyper{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_};
  ops::adamw_update(params_.params(), params_.grads(), m_, v_, hyper, grad_scale, params_.decay_ranges());
}

Tensor AdamW::m(const std::string& name) const {
  const ParamInfo& p = params_.info(name);
  return m_.view(p.offset, p.shape);
}

Tensor AdamW::v(const std::string& name) const {
  const ParamInfo& p = params_.info(name);
  return v_.view(p.offset, p.shape);
}

double global_grad_norm(const ParameterStore& params) {
  return std::sqrt(ops::sum_squares(params.grads()));
}

float clip_coefficient(double grad_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (grad_norm + 1e-6)));
}

}  // namespace lab
