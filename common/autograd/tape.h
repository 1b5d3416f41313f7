// The autograd tape: each differentiable function computes its forward result and records, beside it, a
// closure that computes its backward. backward() runs the closures newest first.
//
// Closures hold the tensors their backward needs (inputs, saved statistics); each closure is destroyed as
// soon as it has run, so activations are freed progressively during the backward pass.
// A tape built with recording=false records nothing: forward-only use (evaluation, sampling) keeps no
// activations alive beyond their last use.
//
// Each recorded step names the Vars whose gradients its closure adds to. That is what gradient hooks rest on
// (var.h): a Var's hook runs once the last step that adds to its gradient has run. A step that adds to a
// gradient without naming its Var would let the hook run too early, before that addition, so every function
// that records must name them all.
//
// Each step also names its op ("linear") and lists the activation tensors its closure keeps alive, so that a
// tape can say what it holds (entries(): chapter 7's memory report) and allocations made while a step runs
// are attributed to "<op>.backward" (MemoryOpScope, memory.h: the memory snapshot's timeline).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/autograd/var.h"

namespace lab {

// A recorded step as entries() lists it.
struct TapeEntry {
  std::string op;
  int64_t kept_bytes = 0;  // activation bytes its closure keeps alive that no earlier entry already keeps
};

class Tape {
 public:
  explicit Tape(bool recording = true) : recording_(recording) {}
  // Steps never run no longer count as pending for their Vars.
  ~Tape() { clear(); }
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  bool recording() const { return recording_; }
  // Records a backward step that adds to the gradients of `adds_to` (undefined Vars and Vars that need no
  // gradient are left out). Ignored when not recording.
  void record(std::function<void()> backward_step, std::initializer_list<Var> adds_to = {});
  // The same, naming the op and the tensors the closure keeps alive (see above).
  void record(const char* op, std::vector<Tensor> keeps, std::function<void()> backward_step,
              std::initializer_list<Var> adds_to = {});
  void record(const char* op, std::vector<Tensor> keeps, std::function<void()> backward_step,
              const std::vector<Var>& adds_to);
  // Runs and clears every recorded step, newest first, running each gradient hook as its Var's gradient
  // becomes final.
  void backward();
  // Drops every recorded step without running it.
  void clear();
  size_t size() const { return steps_.size(); }
  // The recorded steps, oldest first; a storage kept by several steps counts at the first (activation memory
  // only: parameters are not the tape's).
  std::vector<TapeEntry> entries() const;

 private:
  struct Step {
    std::function<void()> backward;
    std::vector<Var> adds_to;
    const char* op = "unnamed";
    std::vector<Tensor> keeps;
  };
  void push(Step step, const Var* adds_to_begin, const Var* adds_to_end);
  bool recording_;
  std::vector<Step> steps_;
};

}  // namespace lab
