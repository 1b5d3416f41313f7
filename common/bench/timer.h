// Timing: a steady-clock stopwatch, and measure(), which runs a piece of work for warm-up and then times
// each repeat separately so the caller can report the median and the spread.
//
// How one repeat is timed is a TimingBackend. On the CPU it is the steady clock around the call. Work
// queued on a GPU returns before it has run, so the CUDA backend supplies its own TimingBackend that
// records CUDA events around the call and waits for the second one (common/lab/device_timing.h:
// timing_for(device) gives the right one for a device, with the L2 flushed between repeats on a GPU);
// benchmarks pass it to measure() and everything else (warm-up, repeats, statistics, JSON results) stays
// the same.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace lab::bench {

class Timer {
 public:
  using Clock = std::chrono::steady_clock;

  Timer() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double milliseconds() const { return 1e3 * seconds(); }

 private:
  Clock::time_point start_;
};

// Times one run of a piece of work.
class TimingBackend {
 public:
  virtual ~TimingBackend() = default;
  virtual std::string name() const = 0;  // printed with results: "steady_clock", "cuda_events", ...
  // Runs `work` once and returns the seconds it took, including any asynchronous work it launched.
  virtual double time(const std::function<void()>& work) = 0;
};

// The steady clock around the call: right for work that is finished when the call returns.
class SteadyClockTiming final : public TimingBackend {
 public:
  std::string name() const override { return "steady_clock"; }
  double time(const std::function<void()>& work) override;
};

// A shared SteadyClockTiming, the default of measure().
TimingBackend& steady_clock_timing();

// Runs `work` `warmup` times untimed (caches, allocator pools, lazy initialisation), then `repeats` times,
// each timed on its own. Returns the seconds of each repeat, in order. Error(InvalidArgument) when
// warmup < 0 or repeats < 1.
std::vector<double> measure(const std::function<void()>& work, int warmup, int repeats,
                            TimingBackend& timing = steady_clock_timing());

}  // namespace lab::bench
