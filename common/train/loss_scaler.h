// Dynamic loss scaling for fp16 mixed precision (Micikevicius et al. 2018; PyTorch's torch.amp.GradScaler).
//
// fp16 holds magnitudes from about 6e-8 (subnormal) to 65504. Small gradients flushed to zero in an fp16
// product are lost; so the loss, and with it every gradient, is multiplied by a large scale before backward,
// and the gradients are divided by it again before the update (fp32, where nothing is lost). Too large a scale
// overflows some product to inf: the step's gradients then contain inf or NaN, and the step is skipped (the
// weights and the optimizer's state stay as they were) and the scale is multiplied by backoff_factor. After
// growth_interval steps in a row without overflow the scale is multiplied by growth_factor, to probe whether a
// larger one fits. The scale thus settles just below the largest that does not overflow.
//
// bf16 has fp32's exponent range and needs no scaling.
//
// A training step keeps the scale and its counts on the device and moves them there (ops::update_loss_scale, the
// same rule as update() below), so that it need not read the gradient norm back to decide; this class is the rule on
// the host, its configuration, and the state that the step reports after each step and checkpoints keep.
#pragma once

#include <cstdint>

namespace lab {

struct LossScalerConfig {
  double init_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // steps without overflow before the scale grows (at most 2^24)
};

// What a checkpoint keeps, so that a resumed run continues with the same scale.
struct LossScalerState {
  double scale = 0;
  int64_t clean_steps = 0;    // steps without overflow since the scale last changed
  int64_t skipped_steps = 0;  // steps skipped for overflow, in the whole run
};

class DynamicLossScaler {
 public:
  // InvalidArgument unless init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and 1 <= growth_interval <=
  // 2^24.
  explicit DynamicLossScaler(const LossScalerConfig& config = {});

  // The scale the next backward multiplies the loss's gradient by.
  double scale() const { return state_.scale; }
  // After a step's backward: the gradients were all finite (the step was taken) or not (it was skipped).
  // Moves the scale as described above.
  void update(bool gradients_finite);

  const LossScalerState& state() const { return state_; }
  // A checkpoint's state; InvalidArgument for a scale that is not finite and positive or negative counts.
  void set_state(const LossScalerState& state);
  const LossScalerConfig& config() const { return config_; }

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace lab
