#include "common/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "common/core/error.h"

namespace lab {

LrSchedule::Kind LrSchedule::parse_kind(const std::string& name) {
  if (name == "constant") return Kind::Constant;
  if (name == "cosine") return Kind::Cosine;
  if (name == "linear") return Kind::Linear;
  fail(ErrorKind::InvalidArgument, "unknown learning-rate schedule '", name, "' (constant, cosine or linear)");
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == Kind::Constant) return max_lr;
  const double min_lr = max_lr * min_lr_fraction;
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double shape = kind == Kind::Cosine ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return min_lr + (max_lr - min_lr) * shape;
}

}  // namespace lab
