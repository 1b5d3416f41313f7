// Optimizer in backward (`--optimizer-in-backward`): each parameter's AdamW update runs as soon as its gradient
// is final, inside the backward pass, and its gradient is released at once.
//
// What changes from the previous rung (the ordinary step, common/train/train_step.h): the gradients are no
// longer one flat buffer alive for the whole step. The model's store releases that buffer
// (ParameterStore::release_flat_grads); backward allocates each parameter's gradient when it first adds to it,
// and a gradient hook (common/autograd/var.h) updates the parameter and frees the gradient when the tape has run
// the last step that adds to it. The gradients alive at once are then the tied token embedding's (GPT-2's LM
// head adds to it first, the embedding last, so it lives through the whole backward) and those of the backward
// step running (a linear's weight and bias): a few tensors instead of the whole model (PyTorch's
// "optimizer step fused into backward" tutorial does the same with register_post_accumulate_grad_hook).
//
// What it gives up, refused with a clear error rather than done wrong:
//   - gradient clipping by global norm: the norm needs every gradient before the first update (PyTorch's docs
//     say the same of optimizer hooks), so the step requires grad_clip 0;
//   - gradient accumulation: every gradient would have to stay alive between the micro-batches' backward passes;
//   - fp16's dynamic loss scaling: a step whose gradients overflow must be skipped whole, but the updates have
//     run before the overflow is known (bf16 needs no loss scaling and trains);
//   - data parallelism and ZeRO: they reduce the gradients across ranks after backward (the trainer refuses).
// The gradient norm is still reported: each gradient's sum of squares is added up before it is released.
// The training result is unchanged: each element gets the same arithmetic on the same gradient as in the flat
// update (tests/ch07_memory/optimizer_in_backward).
#pragma once

#include <string>
#include <vector>

#include "common/train/train_step.h"

namespace lab::ch07 {

// Why a step of `config` cannot update in backward (clipping, or accumulation), as the one line a user sees;
// empty when it can.
std::string optimizer_in_backward_refusal(const TrainStepConfig& config);

class OptimizerInBackwardStep : public TrainStep {
 public:
  // Releases the model's flat gradient buffer for good and sets a gradient hook on every parameter; InvalidArgument
  // with optimizer_in_backward_refusal()'s line, or with a sharded optimizer.
  OptimizerInBackwardStep(GPT2& model, AdamW& optimizer, TrainStepConfig config);
  ~OptimizerInBackwardStep() override;  // removes the hooks
  std::string capture_blocker() const override {
    return "the optimizer in backward updates each parameter from its gradient hook, which the step does not "
           "capture yet";
  }

 protected:
  void run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) override;
  void compute_gradient_norm() override;
  // The updates have run during backward: checks that every parameter got one.
  void optimizer_step(double lr) override;

 private:
  // The hook of parameter `index` (into ParameterStore::infos()).
  void on_gradient_final(size_t index);

  float lr_ = 0;
  Tensor sum_squares_;         // of the gradients final so far in this step ([1] f32 on the device)
  std::vector<bool> updated_;  // per parameter, in this step
};

}  // namespace lab::ch07
