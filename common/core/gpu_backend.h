// The GPU, as the core sees it: the few calls the core makes on a device other than the CPU (how many GPUs
// there are, their names, synchronising one, TF32, its allocator, copying and zeroing bytes, NVTX ranges, timing
// marks).
//
// The core does not include the CUDA backend: it calls gpu_backend(), which the backend defines
// (common/cuda/gpu_backend.cpp, compiled with LAB_WITH_CUDA) and a build without it defines as "none"
// (common/core/no_gpu_backend.cpp). The choice is made when the library is built, so no registration at start-up
// can be missed, and `common/core` depends on `common/cuda` no more than on any chapter.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/core/device.h"

namespace lab {

class Allocator;

// Marks in one GPU's time (device_clock.h): CUDA events recorded on the device's current stream, kept for reuse
// across clear().
class GpuClock {
 public:
  virtual ~GpuClock() = default;
  virtual void mark() = 0;
  // Seconds between marks `from` and `to` (numbered from 0 since the last clear()); waits for `to`.
  virtual double seconds(int from, int to) const = 0;
  virtual void clear() = 0;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual int device_count() const = 0;
  virtual std::string device_name(int device) const = 0;
  // Blocks the host until the device's queued work has finished (the caller's current device stays current).
  virtual void synchronize(int device) const = 0;
  // TF32 tensor-core math for fp32 matrix products, process-wide (the device is validated).
  virtual void set_tf32(int device, bool enabled) const = 0;
  virtual Allocator& allocator(int device) const = 0;
  // Between any two devices, a GPU among them.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) const = 0;
  virtual void memset_zero(void* dst, Device device, size_t bytes) const = 0;
  // An NVTX range around an op (step_profile.h), for Nsight Systems; nothing where NVTX is not built in.
  virtual void range_push(const char* name) const = 0;
  virtual void range_pop() const = 0;
  // A clock of marks on `device` (validated).
  virtual std::unique_ptr<GpuClock> new_clock(int device) const = 0;
};

// The backend of this build; null when it was built without one.
const GpuBackend* gpu_backend();

// The backend, or Error(Unsupported) "<what>: this build has no CUDA backend".
const GpuBackend& require_gpu_backend(const std::string& what);

}  // namespace lab
