// The autograd tape: each differentiable function computes its forward result and records, beside it, a
// closure that computes its backward. backward() runs the closures newest first.
//
// Closures hold the tensors their backward needs (inputs, saved statistics); each closure is destroyed as
// soon as it has run, so activations are freed progressively during the backward pass.
// A tape built with recording=false records nothing: forward-only use (evaluation, sampling) keeps no
// activations alive beyond their last use.
#pragma once

#include <functional>
#include <vector>

namespace lab {

class Tape {
 public:
  explicit Tape(bool recording = true) : recording_(recording) {}
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  bool recording() const { return recording_; }
  void record(std::function<void()> backward_step);  // ignored when not recording
  void backward();                                   // runs and clears every recorded step
  void clear() { steps_.clear(); }
  size_t size() const { return steps_.size(); }

 private:
  bool recording_;
  std::vector<std::function<void()>> steps_;
};

}  // namespace lab
