// Dynamic loss scaling (see loss_scaler.h).
#include "common/train/loss_scaler.h"

#include <cmath>

#include "common/core/error.h"
#include "common/ops/loss_scale.h"

namespace lab {

DynamicLossScaler::DynamicLossScaler(const LossScalerConfig& config) : config_(config) {
  LAB_CHECK(std::isfinite(config.init_scale) && config.init_scale > 0, InvalidArgument,
            "loss scaling: the initial scale must be finite and > 0, got ", config.init_scale);
  LAB_CHECK(config.growth_factor > 1, InvalidArgument, "loss scaling: growth_factor must be > 1, got ",
            config.growth_factor);
  LAB_CHECK(config.backoff_factor > 0 && config.backoff_factor < 1, InvalidArgument,
            "loss scaling: backoff_factor must be in (0, 1), got ", config.backoff_factor);
  LAB_CHECK(config.growth_interval >= 1 && config.growth_interval <= ops::kMaxGrowthInterval, InvalidArgument,
            "loss scaling: growth_interval must be in [1, 2^24] (the step counts it on the device, in f32), got ",
            config.growth_interval);
  state_.scale = config.init_scale;
}

void DynamicLossScaler::update(bool gradients_finite) {
  ops::advance_loss_scale(state_.scale, state_.clean_steps, state_.skipped_steps, gradients_finite,
                          config_.growth_factor, config_.backoff_factor, config_.growth_interval);
}

void DynamicLossScaler::set_state(const LossScalerState& state) {
  LAB_CHECK(std::isfinite(state.scale) && state.scale > 0, InvalidArgument,
            "loss scaling: a saved scale must be finite and > 0, got ", state.scale);
  LAB_CHECK(state.clean_steps >= 0 && state.skipped_steps >= 0, InvalidArgument,
            "loss scaling: negative step counts in a saved state (", state.clean_steps, ", ", state.skipped_steps, ")");
  state_ = state;
}

}  // namespace lab
