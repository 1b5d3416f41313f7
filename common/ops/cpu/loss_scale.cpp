// The loss scale's update on the CPU (see loss_scale.h).
#include "common/ops/loss_scale.h"

#include <limits>

namespace lab::ops::cpu {

void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval) {
  float* ns = norm_and_scale.data<float>();
  float* s = scaler.data<float>();
  const bool finite = finite_value(ns[0]);
  advance_loss_scale(s[kLossScale], s[kCleanSteps], s[kSkippedSteps], finite, growth_factor, backoff_factor,
                     growth_interval);
  s[kStepSkipped] = finite ? 0.0f : 1.0f;
  if (!finite) ns[1] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace lab::ops::cpu
