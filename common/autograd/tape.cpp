// Recording, running and dropping backward steps, with the count of pending steps per Var (see tape.h).
#include "common/autograd/tape.h"

#include <set>

namespace lab {

void Tape::record(std::function<void()> backward_step, std::initializer_list<Var> adds_to) {
  if (!recording_) return;
  push(Step{std::move(backward_step), {}, "unnamed", {}}, adds_to.begin(), adds_to.end());
}

void Tape::record(const char* op, std::vector<Tensor> keeps, std::function<void()> backward_step,
                  std::initializer_list<Var> adds_to) {
  if (!recording_) return;
  push(Step{std::move(backward_step), {}, op, std::move(keeps)}, adds_to.begin(), adds_to.end());
}

void Tape::record(const char* op, std::vector<Tensor> keeps, std::function<void()> backward_step,
                  const std::vector<Var>& adds_to) {
  if (!recording_) return;
  push(Step{std::move(backward_step), {}, op, std::move(keeps)}, adds_to.data(), adds_to.data() + adds_to.size());
}

void Tape::push(Step step, const Var* adds_to_begin, const Var* adds_to_end) {
  for (const Var* v = adds_to_begin; v != adds_to_end; ++v)
    if (v->requires_grad()) {
      ++v->node_->pending_gradient_steps;
      step.adds_to.push_back(v->without_value());  // the tape counts gradients; it keeps no values alive
    }
  steps_.push_back(std::move(step));
}

std::vector<TapeEntry> Tape::entries() const {
  std::vector<TapeEntry> out;
  std::set<const Storage*> counted;
  for (const Step& step : steps_) {
    TapeEntry entry{step.op, 0};
    for (const Tensor& t : step.keeps)
      if (t.defined() && t.storage()->category() == MemCategory::Activations && !t.storage()->released() &&
          counted.insert(t.storage().get()).second)
        entry.kept_bytes += static_cast<int64_t>(t.storage()->bytes());
    out.push_back(std::move(entry));
  }
  return out;
}

void Tape::backward() {
  while (!steps_.empty()) {
    Step step = std::move(steps_.back());
    steps_.pop_back();
    {
      const std::string name = std::string(step.op) + ".backward";
      MemoryOpScope op(name.c_str());
      step.backward();
      step.backward = nullptr;  // release what the closure held before the hooks run
      step.keeps.clear();
    }
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
