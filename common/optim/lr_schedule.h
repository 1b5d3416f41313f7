// Learning-rate schedules: linear warmup, then constant, cosine or linear decay to min_lr_fraction * lr.
#pragma once

#include <cstdint>
#include <string>

namespace lab {

struct LrSchedule {
  enum class Kind { Constant, Cosine, Linear };
  Kind kind = Kind::Cosine;
  double max_lr = 3e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_fraction = 0.1;  // decays end at max_lr * min_lr_fraction

  static Kind parse_kind(const std::string& name);  // "constant" | "cosine" | "linear"
  // Learning rate of 0-based step `step`: warmup ramps (step+1)/warmup * max_lr.
  double at(int64_t step) const;
};

}  // namespace lab
