// The timing backend for work on a device (see common/bench/timer.h for the idea of a TimingBackend).
//
//   CPU:   the steady clock around the call ("steady_clock").
//   CUDA:  CUDA events recorded on the device's current stream before and after the call; the host waits for
//          the second one and the time is the GPU's time between the two ("cuda_events"). With flush_l2, a
//          buffer larger than the L2 cache (128 MiB, or twice the L2 where that is more: H100's is 50 MB) is
//          overwritten before the first event, so each repeat finds its inputs in memory, not in the cache.
//          In the CUDA emulation build the same code runs, but event times are CPU times: the name is then
//          "emulated", and such times must never be shown as GPU times.
//
// Plain C++: any file may include it; a CPU-only build gives Error(Unsupported) for a CUDA device.
#pragma once

#include <memory>

#include "common/bench/timer.h"
#include "common/core/device.h"

namespace lab::kernel_lab {

struct DeviceTimingOptions {
  bool flush_l2 = true;  // CUDA only: flush the L2 before each timed call
};

std::unique_ptr<bench::TimingBackend> timing_for(Device device, const DeviceTimingOptions& options = {});

}  // namespace lab::kernel_lab
