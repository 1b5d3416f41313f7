#include "common/data/slow_source.h"

#include <time.h>

#include <chrono>
#include <thread>

namespace lab {

namespace {

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void SlowSource::pay() const {
  if (read_latency_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(read_latency_us));
  if (preprocess_us <= 0) return;
  const int64_t until = thread_cpu_ns() + preprocess_us * 1000;
  // Arithmetic the compiler cannot drop: its result is stored to a volatile.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  while (thread_cpu_ns() < until)
    for (int i = 0; i < 256; ++i) state = state * 6364136223846793005ull + 1442695040888963407ull;
  volatile uint64_t sink = state;
  static_cast<void>(sink);
}

}  // namespace lab
