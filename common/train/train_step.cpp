// The training step and its default parts (see train_step.h).
#include "common/train/train_step.h"

#include <cmath>
#include <vector>

#include "common/autograd/tape.h"
#include "common/bench/timer.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/ops/reduce.h"

namespace lab {

namespace {

// The step's scalars, in one f32 tensor on the model's device.
enum StepScalar : int64_t { kLossSum, kGradNorm, kGradScale, kScalars };

}  // namespace

TrainStep::TrainStep(GPT2& model, AdamW& optimizer, TrainStepConfig config)
    : model_(model), optimizer_(optimizer), config_(config) {
  LAB_CHECK(config_.accum_steps >= 1, InvalidArgument, "TrainStep: accum_steps must be >= 1, got ",
            config_.accum_steps);
  LAB_CHECK(config_.grad_clip >= 0, InvalidArgument, "TrainStep: grad_clip must be >= 0, got ", config_.grad_clip);
  {
    MemoryScope scope(MemCategory::Other);
    scalars_ = Tensor::zeros({kScalars}, DType::F32, model_.device());
  }
  loss_sum_ = scalars_.view(kLossSum, {1});
  grad_norm_ = scalars_.view(kGradNorm, {1});
  grad_scale_ = scalars_.view(kGradScale, {1});
}

void TrainStep::set_loss_scaling(const std::optional<LossScalerConfig>& scaling) {
  loss_scaler_.reset();
  if (scaling) loss_scaler_.emplace(*scaling);
}

TrainStepResult TrainStep::run(const BatchSource& next_batch, double lr) {
  enqueue(next_batch, lr);
  return report();
}

void TrainStep::enqueue(const BatchSource& next_batch, double lr) {
  pending_ = TrainStepResult{};
  pending_.lr = lr;
  step_timer_.restart();
  restart_phase();
  zero_grads();
  scalars_.zero_();
  run_micro_batches(next_batch, pending_);
  reduce_gradients();
  const double scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  compute_gradient_norm(scale);
  if (loss_scaler_) {  // whether to skip the update is decided here, on the host: the one read of fp16 steps
    const bool finite = std::isfinite(grad_norm_.item());
    pending_.loss_scale = scale;
    pending_.skipped = !finite;
    loss_scaler_->update(finite);
  }
  if (!pending_.skipped) {
    optimizer_step(lr);
    if (!writes_16bit_copy()) model_.refresh_matmul_weights();
  }
  lap(pending_.optimizer_seconds);
}

TrainStepResult TrainStep::report() {
  const std::vector<float> scalars = scalars_.to_floats();  // waits for the step
  TrainStepResult result = pending_;
  result.loss = scalars[kLossSum];
  result.grad_norm = scalars[kGradNorm];
  result.seconds = step_timer_.seconds();
  return result;
}

std::string TrainStep::capture_blocker() const {
  if (!model_.device().is_cuda()) return "the model is on the CPU, which has no kernels to capture";
  if (loss_scaler_) return "fp16 loss scaling decides on the host whether to skip the update (use bf16)";
  if (config_.time_phases) return "timing the phases synchronises the device between them";
  if (optimizer_.offloaded()) return "the offloaded optimizer updates on the CPU";
  return "";
}

void TrainStep::zero_grads() {
  model_.parameters().zero_grad();
}

void TrainStep::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  const Device device = model_.device();
  for (int64_t micro = 0; micro < config_.accum_steps; ++micro) {
    lap(result.forward_seconds);  // the zeroing before the first micro-batch
    const bench::Timer data_timer;
    MicroBatch batch = next_batch();
    if (batch.inputs.device() != device) batch.inputs = batch.inputs.to(device);
    if (batch.targets.device() != device) batch.targets = batch.targets.to(device);
    result.data_seconds += data_timer.seconds();
    restart_phase();
    forward_backward(batch, result);
  }
}

void TrainStep::forward_backward(const MicroBatch& batch, TrainStepResult& result) {
  Tape tape;
  const Tensor losses = model_.loss(tape, batch.inputs, batch.targets, loss_gradient_scale());
  lap(result.forward_seconds);
  tape.backward();
  ops::accumulate_sum(loss_sum_, losses,
                      1.0 / (static_cast<double>(losses.numel()) * static_cast<double>(config_.accum_steps)));
  lap(result.backward_seconds);
}

void TrainStep::compute_gradient_norm(double loss_scale) {
  ops::gradient_norm_and_scale(scalars_.view(kGradNorm, {2}), model_.parameters().grads(), config_.grad_clip,
                               loss_scale);
}

void TrainStep::optimizer_step(double lr) {
  if (writes_16bit_copy())
    optimizer_.step_with_16bit_copy(static_cast<float>(lr), grad_scale(), model_.params_16bit());
  else
    optimizer_.step(static_cast<float>(lr), grad_scale());
}

bool TrainStep::writes_16bit_copy() const {
  return model_.params_16bit().defined() && !optimizer_.sharded() && !optimizer_.offloaded();
}

void TrainStep::write_loss(double loss) {
  loss_sum_.copy_from(Tensor::from_floats(std::vector<float>{static_cast<float>(loss)}, {1}));
}

void TrainStep::write_gradient_norm(const Tensor& sum_squares, double loss_scale) {
  ops::norm_and_scale(scalars_.view(kGradNorm, {2}), sum_squares, config_.grad_clip, loss_scale);
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
