// A device's marks in time (see device_clock.h).
#include "common/core/device_clock.h"

#include "common/core/error.h"
#include "common/core/gpu_backend.h"

namespace lab {

DeviceClock::DeviceClock(Device device) {
  if (device.is_cuda()) gpu_ = require_gpu_backend("DeviceClock").new_clock(device.index);
}

DeviceClock::~DeviceClock() = default;

int DeviceClock::mark() {
  if (gpu_)
    gpu_->mark();
  else
    host_marks_.push_back(std::chrono::steady_clock::now());
  return marks_++;
}

double DeviceClock::seconds(int from, int to) const {
  LAB_CHECK(0 <= from && from <= to && to < marks_, InvalidArgument, "DeviceClock: no span from mark ", from,
            " to mark ", to, " (", marks_, " marks)");
  if (gpu_) return gpu_->seconds(from, to);
  return std::chrono::duration<double>(host_marks_[static_cast<size_t>(to)] - host_marks_[static_cast<size_t>(from)])
      .count();
}

void DeviceClock::clear() {
  marks_ = 0;
  host_marks_.clear();
  if (gpu_) gpu_->clear();
}

}  // namespace lab
