// Recording, running and dropping backward steps, with the count of pending steps per Var (see tape.h).
#include "common/autograd/tape.h"

namespace lab {

void Tape::record(std::function<void()> backward_step, std::initializer_list<Var> adds_to) {
  if (!recording_) return;
  Step step{std::move(backward_step), {}};
  for (const Var& v : adds_to)
    if (v.requires_grad()) {
      ++v.node_->pending_gradient_steps;
      step.adds_to.push_back(v);
    }
  steps_.push_back(std::move(step));
}

void Tape::backward() {
  while (!steps_.empty()) {
    Step step = std::move(steps_.back());
    steps_.pop_back();
    step.backward();
    step.backward = nullptr;  // release what the closure held before the hooks run
    for (const Var& v : step.adds_to)
      if (--v.node_->pending_gradient_steps == 0 && v.node_->gradient_hook) v.node_->gradient_hook();
  }
}

void Tape::clear() {
  for (const Step& step : steps_)
    for (const Var& v : step.adds_to) --v.node_->pending_gradient_steps;
  steps_.clear();
}

}  // namespace lab
