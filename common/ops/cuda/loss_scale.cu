// The loss scale's update on the GPU (see loss_scale.h): one thread, after the kernel that wrote the norm.
#include <math_constants.h>

#include "common/ops/cuda/launch.cuh"
#include "common/ops/loss_scale.h"

namespace lab::ops::cuda {

namespace {

__global__ void update_loss_scale_kernel(float* norm_and_scale, float* scaler, double growth_factor,
                                         double backoff_factor, int64_t growth_interval) {
  const bool finite = finite_value(norm_and_scale[0]);
  advance_loss_scale(scaler[kLossScale], scaler[kCleanSteps], scaler[kSkippedSteps], finite, growth_factor,
                     backoff_factor, growth_interval);
  scaler[kStepSkipped] = finite ? 0.0f : 1.0f;
  if (!finite) norm_and_scale[1] = CUDART_NAN_F;
}

}  // namespace

void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval) {
  LaunchScope scope(scaler);
  LAB_LAUNCH(update_loss_scale_kernel, {1, 1, 0, scope.stream()}, norm_and_scale.data<float>(), scaler.data<float>(),
             growth_factor, backoff_factor, growth_interval);
}

}  // namespace lab::ops::cuda
