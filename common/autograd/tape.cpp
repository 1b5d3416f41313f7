#include "common/autograd/tape.h"

namespace lab {

void Tape::record(std::function<void()> backward_step) {
  if (recording_) steps_.push_back(std::move(backward_step));
}

void Tape::backward() {
  while (!steps_.empty()) {
    std::function<void()> step = std::move(steps_.back());
    steps_.pop_back();
    step();
  }  // `step` dies here, releasing what it held
}

}  // namespace lab
