// The optimizer-in-backward step: per-parameter updates from gradient hooks (see optimizer_in_backward.h).
#include "ch07_memory/optimizer_in_backward.h"

#include "common/core/error.h"
#include "common/ops/reduce.h"

namespace lab::ch07 {

std::string optimizer_in_backward_refusal(const TrainStepConfig& config) {
  if (config.grad_clip != 0)
    return cat("--optimizer-in-backward: gradient clipping by global norm (--grad-clip ", config.grad_clip,
               ") needs every gradient before the first update, but each parameter is updated as soon as its own "
               "gradient is final; give --grad-clip 0");
  if (config.accum_steps != 1)
    return cat("--optimizer-in-backward: gradient accumulation (", config.accum_steps,
               " micro-batches per step) would keep every gradient alive between backward passes; give one "
               "micro-batch per step (no --total-batch-tokens)");
  return "";
}

OptimizerInBackwardStep::OptimizerInBackwardStep(GPT2& model, AdamW& optimizer, TrainStepConfig config)
    : TrainStep(model, optimizer, config) {
  const std::string why = optimizer_in_backward_refusal(config);
  LAB_CHECK(why.empty(), InvalidArgument, why);
  LAB_CHECK(!optimizer.sharded(), InvalidArgument, "--optimizer-in-backward: the optimizer is sharded (ZeRO)");
  ParameterStore& params = model.parameters();
  params.release_flat_grads();
  updated_.assign(params.infos().size(), false);
  for (size_t i = 0; i < params.infos().size(); ++i)
    params.var(params.infos()[i].name).set_gradient_hook([this, i] { on_gradient_final(i); });
}

OptimizerInBackwardStep::~OptimizerInBackwardStep() {
  const ParameterStore& params = model().parameters();
  for (const ParamInfo& p : params.infos()) params.var(p.name).set_gradient_hook({});
}

void OptimizerInBackwardStep::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  LAB_CHECK(loss_scaler() == nullptr, InvalidArgument,
            "--optimizer-in-backward: fp16's dynamic loss scaling skips a step whose gradients overflow, but the "
            "updates run during backward, before the overflow is known; use --dtype bf16 or fp32");
  lr_ = static_cast<float>(result.lr);
  sum_squares_ = Tensor::zeros({1}, DType::F32, model().device());
  updated_.assign(updated_.size(), false);
  optimizer().begin_step();
  TrainStep::run_micro_batches(next_batch, result);
}

void OptimizerInBackwardStep::on_gradient_final(size_t index) {
  const ParamInfo& p = model().parameters().infos()[index];
  const Var& var = model().parameters().var(p.name);
  const Tensor& grad = var.grad();
  ops::accumulate_sum_squares(sum_squares_, grad);                // on the device: backward goes on without a host read
  optimizer().update(p.name, grad, lr_, model().params_16bit());  // the 16-bit copy too (writes_16bit_copy())
  var.bind_grad(Tensor());  // the gradient's memory goes back now, not at the end of the step
  updated_[index] = true;
}

void OptimizerInBackwardStep::compute_gradient_norm() {
  write_gradient_norm(sum_squares_);
}

void OptimizerInBackwardStep::optimizer_step(double) {
  const std::vector<ParamInfo>& infos = model().parameters().infos();
  for (size_t i = 0; i < infos.size(); ++i)
    LAB_CHECK(updated_[i], Internal, "optimizer in backward: parameter '", infos[i].name,
              "' got no gradient in this step, so it was not updated");
}

}  // namespace lab::ch07
