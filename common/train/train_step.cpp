// The training step and its default parts (see train_step.h).
#include "common/train/train_step.h"

#include <cmath>

#include "common/autograd/tape.h"
#include "common/bench/timer.h"
#include "common/core/error.h"
#include "common/ops/reduce.h"

namespace lab {

TrainStep::TrainStep(GPT2& model, AdamW& optimizer, TrainStepConfig config)
    : model_(model), optimizer_(optimizer), config_(config) {
  LAB_CHECK(config_.accum_steps >= 1, InvalidArgument, "TrainStep: accum_steps must be >= 1, got ",
            config_.accum_steps);
  LAB_CHECK(config_.grad_clip >= 0, InvalidArgument, "TrainStep: grad_clip must be >= 0, got ", config_.grad_clip);
}

void TrainStep::set_loss_scaling(const std::optional<LossScalerConfig>& scaling) {
  loss_scaler_.reset();
  if (scaling) loss_scaler_.emplace(*scaling);
}

TrainStepResult TrainStep::run(const BatchSource& next_batch, double lr) {
  TrainStepResult result;
  result.lr = lr;
  const bench::Timer step_timer;
  restart_phase();
  zero_grads();
  run_micro_batches(next_batch, result);
  reduce_gradients();
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  result.grad_norm = gradient_norm() / scale;
  const bool finite = std::isfinite(result.grad_norm);
  if (loss_scaler_) {
    result.loss_scale = scale;
    result.skipped = !finite;
    loss_scaler_->update(finite);
  }
  if (!result.skipped) {
    optimizer_step(lr, static_cast<float>(clip_coefficient(result.grad_norm, config_.grad_clip) / scale));
    model_.refresh_matmul_weights();
  }
  lap(result.optimizer_seconds);
  synchronize(model_.device());
  result.seconds = step_timer.seconds();
  return result;
}

void TrainStep::zero_grads() {
  model_.parameters().zero_grad();
}

void TrainStep::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  const Device device = model_.device();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < config_.accum_steps; ++micro) {
    lap(result.forward_seconds);  // the zeroing before the first micro-batch
    const bench::Timer data_timer;
    MicroBatch batch = next_batch();
    if (batch.inputs.device() != device) batch.inputs = batch.inputs.to(device);
    if (batch.targets.device() != device) batch.targets = batch.targets.to(device);
    result.data_seconds += data_timer.seconds();
    restart_phase();
    loss_sum += forward_backward(batch, result);
  }
  result.loss = loss_sum / static_cast<double>(config_.accum_steps);
}

double TrainStep::forward_backward(const MicroBatch& batch, TrainStepResult& result) {
  Tape tape;
  const Tensor losses = model_.loss(tape, batch.inputs, batch.targets, loss_gradient_scale());
  lap(result.forward_seconds);
  tape.backward();
  const double mean_loss = ops::sum(losses) / static_cast<double>(losses.numel());
  lap(result.backward_seconds);
  return mean_loss;
}

double TrainStep::gradient_norm() {
  return global_grad_norm(model_.parameters());
}

void TrainStep::optimizer_step(double lr, float clip_coefficient) {
  optimizer_.step(static_cast<float>(lr), clip_coefficient);
}

float TrainStep::loss_gradient_scale() const {
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  return static_cast<float>(scale / static_cast<double>(config_.accum_steps));
}

void TrainStep::lap(double& phase_seconds) {
  if (!config_.time_phases) return;
  synchronize(model_.device());
  phase_seconds += phase_timer_.seconds();
  phase_timer_.restart();
}

void TrainStep::restart_phase() {
  phase_timer_.restart();
}

}  // namespace lab
