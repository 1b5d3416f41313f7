// Dynamic loss scaling's rule (common/train/loss_scaler.h), and the op that applies it on the step's device, so that
// an fp16 step decides whether to skip its update without reading the gradient norm back to the host.
//
//   update_loss_scale(norm_and_scale, scaler, growth_factor, backoff_factor, growth_interval)
//     after the step's gradient norm (norm_and_scale: [norm, update's gradient scale], as
//     ops::gradient_norm_and_scale writes them), with `scaler` the scaler's state [kLossScaleSlots] (f32, on the
//     same device):
//       a finite norm:  the step is taken; clean_steps + 1, and after growth_interval clean steps in a row the
//                       scale is multiplied by growth_factor (clean_steps back to 0);
//       otherwise:      the step is skipped: the update's gradient scale becomes NaN, which ops::adamw_update reads
//                       as "leave everything as it is", the scale is multiplied by backoff_factor, clean_steps is
//                       0 and skipped_steps + 1.
//     scaler[kStepSkipped] says which (1 or 0) for the step's report.
//
// The state is f32 on the device: the scale is exact for the default powers of two (65536, factors 2 and 0.5), and the
// counts are exact up to 2^24 (16.7 million steps), which is why DynamicLossScaler refuses a longer growth_interval.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

#ifdef __CUDACC__
#define LAB_LOSS_SCALE_HOST_DEVICE __host__ __device__
#else
#define LAB_LOSS_SCALE_HOST_DEVICE
#endif

namespace lab::ops {

enum LossScaleSlot : int64_t { kLossScale, kCleanSteps, kSkippedSteps, kStepSkipped, kLossScaleSlots };

// The largest growth_interval the f32 step counts hold exactly.
inline constexpr int64_t kMaxGrowthInterval = int64_t{1} << 24;

// The rule, for the host's scaler (double scale, integer counts) and the device's (f32 throughout): one step's
// outcome moves the scale and the counts.
template <typename Real, typename Count>
LAB_LOSS_SCALE_HOST_DEVICE inline void advance_loss_scale(Real& scale, Count& clean_steps, Count& skipped_steps,
                                                          bool gradients_finite, double growth_factor,
                                                          double backoff_factor, int64_t growth_interval) {
  if (!gradients_finite) {
    scale = static_cast<Real>(scale * backoff_factor);
    clean_steps = 0;
    skipped_steps += 1;
    return;
  }
  clean_steps += 1;
  if (clean_steps == static_cast<Count>(growth_interval)) {
    scale = static_cast<Real>(scale * growth_factor);
    clean_steps = 0;
  }
}

// Whether x is finite, written the same for the host and a kernel: x - x is 0 for a finite x, NaN for inf and NaN.
LAB_LOSS_SCALE_HOST_DEVICE inline bool finite_value(float x) {
  return x - x == 0.0f;
}

void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval);

namespace cpu {
void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval);
}  // namespace cpu
namespace cuda {
void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval);
}  // namespace cuda

}  // namespace lab::ops
