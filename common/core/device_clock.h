// Times a device's work without synchronising it (pipeline parallelism's bubble, chapter 8).
//
// mark() notes the point the device's queue has reached: on a GPU a CUDA event recorded on the current stream (the
// backend's GpuClock), on the CPU the steady clock, as a CPU op has run by the time it returns. seconds(a, b) is
// how long the device took from mark a to mark b. On a GPU it waits for mark b, so a caller reads its marks once,
// after the work they time (at a step's report), instead of synchronising between the ops:
//
//   DeviceClock clock(device);
//   const int start = clock.mark();
//   forward();                                   // queued, not waited for
//   const int end = clock.mark();
//   ...                                          // the rest of the step
//   const double busy = clock.seconds(start, end);
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "common/core/device.h"

namespace lab {

class GpuClock;

class DeviceClock {
 public:
  explicit DeviceClock(Device device);
  ~DeviceClock();
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  // Notes the point the device's queue has reached; returns its number (0, 1, ... since the last clear()).
  int mark();
  // Seconds from mark `from` to mark `to`, as the device ran the work between them; waits for `to` on a GPU.
  double seconds(int from, int to) const;
  // Forgets the marks (a GPU's events are kept for the next ones).
  void clear();
  int marks() const { return marks_; }

 private:
  int marks_ = 0;
  std::vector<std::chrono::steady_clock::time_point> host_marks_;  // the CPU's
  std::unique_ptr<GpuClock> gpu_;                                  // a GPU's
};

}  // namespace lab
