// The training step and its default parts (see train_step.h).
#include "common/train/train_step.h"

#include <vector>

#include "common/autograd/tape.h"
#include "common/bench/timer.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/ops/loss_scale.h"
#include "common/ops/reduce.h"

namespace lab {

namespace {

// The step's scalars, in one f32 tensor on the model's device, followed there by the loss scaler's state
// (ops::LossScaleSlot order), which lives from step to step.
enum StepScalar : int64_t { kLossSum, kGradNorm, kGradScale, kScalars };

}  // namespace

TrainStep::TrainStep(GPT2& model, AdamW& optimizer, TrainStepConfig config)
    : model_(model), optimizer_(optimizer), config_(config) {
  LAB_CHECK(config_.accum_steps >= 1, InvalidArgument, "TrainStep: accum_steps must be >= 1, got ",
            config_.accum_steps);
  LAB_CHECK(config_.grad_clip >= 0, InvalidArgument, "TrainStep: grad_clip must be >= 0, got ", config_.grad_clip);
  {
    MemoryScope scope(MemCategory::Other);
    scalars_ = Tensor::zeros({int64_t{kScalars} + ops::kLossScaleSlots}, DType::F32, model_.device());
  }
  step_scalars_ = scalars_.view(0, {kScalars});
  scaler_state_ = scalars_.view(kScalars, {ops::kLossScaleSlots});
  loss_sum_ = scalars_.view(kLossSum, {1});
  grad_scale_ = scalars_.view(kGradScale, {1});
}

void TrainStep::set_loss_scaling(const std::optional<LossScalerConfig>& scaling) {
  loss_scaler_.reset();
  if (!scaling) return;
  loss_scaler_.emplace(*scaling);
  write_scaler_state();
}

void TrainStep::set_loss_scaler_state(const LossScalerState& state) {
  LAB_CHECK(loss_scaler_.has_value(), InvalidArgument, "TrainStep: a loss scaler's state, but no loss scaling");
  loss_scaler_->set_state(state);
  write_scaler_state();
}

void TrainStep::write_scaler_state() {
  const LossScalerState& s = loss_scaler_->state();
  std::vector<float> state(ops::kLossScaleSlots, 0.0f);
  state[ops::kLossScale] = static_cast<float>(s.scale);
  state[ops::kCleanSteps] = static_cast<float>(s.clean_steps);
  state[ops::kSkippedSteps] = static_cast<float>(s.skipped_steps);
  scaler_state_.copy_from(Tensor::from_floats(state, {ops::kLossScaleSlots}));
}

TrainStepResult TrainStep::run(const BatchSource& next_batch, double lr) {
  enqueue(next_batch, lr);
  return report();
}

void TrainStep::enqueue(const BatchSource& next_batch, double lr) {
  LAB_CHECK(!loss_scaler_ || reported_, InvalidArgument,
            "TrainStep: with loss scaling, report() each step before the next enqueue() (the report takes the step's "
            "outcome: whether its update was skipped)");
  reported_ = false;
  pending_ = TrainStepResult{};
  pending_.lr = lr;
  step_timer_.restart();
  restart_phase();
  zero_grads();
  step_scalars_.zero_();
  run_micro_batches(next_batch, pending_);
  model_.parameters().zero_unwritten_grads();
  reduce_gradients();
  compute_gradient_norm();
  // Loss scaling: an inf/NaN norm marks the update's gradient scale NaN, and the update then leaves everything as it
  // was; the scale moves on the device (ops::update_loss_scale). Nothing is read back to decide.
  if (loss_scaler_) {
    const LossScalerConfig& c = loss_scaler_->config();
    ops::update_loss_scale(scalars_.view(kGradNorm, {2}), scaler_state_, c.growth_factor, c.backoff_factor,
                           c.growth_interval);
  }
  optimizer_step(lr);
  if (!writes_16bit_copy()) model_.refresh_matmul_weights();
  lap(pending_.optimizer_seconds);
}

TrainStepResult TrainStep::report() {
  before_read_back();
  const std::vector<float> scalars = scalars_.to_floats();  // waits for the step
  TrainStepResult result = pending_;
  result.loss = scalars[kLossSum];
  result.grad_norm = scalars[kGradNorm];
  if (loss_scaler_) {
    // The scaler's state moved on the device; the host's copy (what checkpoints keep) follows it here. Its scale
    // before that is the one this step's backward used.
    const float* s = scalars.data() + kScalars;
    result.loss_scale = loss_scaler_->scale();
    result.skipped = s[ops::kStepSkipped] != 0.0f;
    loss_scaler_->set_state(
        {s[ops::kLossScale], static_cast<int64_t>(s[ops::kCleanSteps]), static_cast<int64_t>(s[ops::kSkippedSteps])});
    // A skipped update was no AdamW step: its count goes back (PyTorch's GradScaler skips optimizer.step()).
    if (result.skipped) optimizer_.set_steps_taken(optimizer_.steps_taken() - 1);
  }
  reported_ = true;
  after_report();
  result.seconds = step_timer_.seconds();
  return result;
}

std::string TrainStep::capture_blocker() const {
  if (!model_.device().is_cuda()) return "the model is on the CPU, which has no kernels to capture";
  if (config_.time_phases) return "timing the phases synchronises the device between them";
  if (optimizer_.offloaded()) return "the offloaded optimizer updates on the CPU";
  return "";
}

void TrainStep::zero_grads() {
  model_.parameters()
      .start_new_gradients();  // on CUDA no zero-fill: each parameter's first contribution writes over it
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

void TrainStep::compute_gradient_norm() {
  ops::gradient_norm_and_scale(scalars_.view(kGradNorm, {2}), model_.parameters().grads(), config_.grad_clip,
                               loss_scale());
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

void TrainStep::write_gradient_norm(const Tensor& sum_squares) {
  ops::norm_and_scale(scalars_.view(kGradNorm, {2}), sum_squares, config_.grad_clip, loss_scale());
}

ops::GradScale TrainStep::loss_scale() const {
  if (!loss_scaler_) return 1.0f;
  return ops::GradScale(scaler_state_.view(ops::kLossScale, {1}));
}

ops::GradScale TrainStep::loss_gradient_scale() const {
  ops::GradScale scale = loss_scale();
  scale.value = static_cast<float>(1.0 / static_cast<double>(config_.accum_steps));
  return scale;
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
