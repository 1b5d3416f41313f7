// The timing backend for a device (see device_timing.h).
#include "common/lab/device_timing.h"

#include "common/core/error.h"
#ifdef LAB_WITH_CUDA
#include "common/lab/cuda_event_timing.h"
#endif

namespace lab::kernel_lab {

std::unique_ptr<bench::TimingBackend> timing_for(Device device, const DeviceTimingOptions& options) {
  if (device.is_cpu()) return std::make_unique<bench::SteadyClockTiming>();
#ifdef LAB_WITH_CUDA
  return make_cuda_event_timing(device.index, options.flush_l2);
#else
  (void)options;
  fail(ErrorKind::Unsupported, "timing on ", device.str(), ": this build has no CUDA backend");
#endif
}

}  // namespace lab::kernel_lab
