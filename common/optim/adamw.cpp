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
  ops::AdamWHyper hyper{lr, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, step_};
  const int64_t split = params_.decay_numel(), total = params_.numel();
  auto range = [](const Tensor& t, int64_t begin, int64_t end) { return t.view(begin, {end - begin}); };
  if (split > 0)
    ops::adamw_update(range(params_.params(), 0, split), range(params_.grads(), 0, split), range(m_, 0, split),
                      range(v_, 0, split), hyper, grad_scale);
  if (total > split) {
    hyper.weight_decay = 0.0f;
    ops::adamw_update(range(params_.params(), split, total), range(params_.grads(), split, total),
                      range(m_, split, total), range(v_, split, total), hyper, grad_scale);
  }
}

double global_grad_norm(const ParameterStore& params) {
  return std::sqrt(ops::sum_squares(params.grads()));
}

float clip_coefficient(double grad_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (grad_norm + 1e-6)));
}

}  // namespace lab
