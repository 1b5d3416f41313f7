// Steady-clock timing and the warm-up + repeats loop.
#include "common/bench/timer.h"

#include <cstddef>

#include "common/core/error.h"

namespace lab::bench {

double SteadyClockTiming::time(const std::function<void()>& work) {
  const Timer timer;
  work();
  return timer.seconds();
}

TimingBackend& steady_clock_timing() {
  static SteadyClockTiming timing;
  return timing;
}

std::vector<double> measure(const std::function<void()>& work, int warmup, int repeats, TimingBackend& timing) {
  LAB_CHECK(warmup >= 0, InvalidArgument, "measure: warmup must be >= 0, got ", warmup);
  LAB_CHECK(repeats >= 1, InvalidArgument, "measure: repeats must be >= 1, got ", repeats);
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) seconds.push_back(timing.time(work));
  return seconds;
}

}  // namespace lab::bench
