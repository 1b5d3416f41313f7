// The CUDA backend's answer to the core's gpu_backend() (common/core/gpu_backend.h).
#include "common/core/gpu_backend.h"

#include <memory>
#include <vector>

#include "common/cuda/caching_allocator.h"
#include "common/cuda/cublas.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

#ifndef LAB_CUDA_EMULATION
#include <nvtx3/nvToolsExt.h>  // header-only NVTX 3: a no-op until a tool such as Nsight Systems attaches
#endif

namespace lab {

namespace {

// Marks as timing events on the device's current stream. An event is made the first time its mark number is used
// and recorded again after clear(), so a step that marks the same points every step creates its events once.
class CudaClock final : public GpuClock {
 public:
  explicit CudaClock(int device) : device_(device) { cuda::check_device_index(device); }
  void mark() override {
    if (used_ == events_.size()) {
      cuda::DeviceGuard guard(device_);  // an event belongs to the device current when it is made
      events_.push_back(std::make_unique<cuda::Event>());
    }
    events_[used_++]->record();
  }
  double seconds(int from, int to) const override {
    return 1e-3 * static_cast<double>(
                      cuda::elapsed_ms(*events_.at(static_cast<size_t>(from)), *events_.at(static_cast<size_t>(to))));
  }
  void clear() override { used_ = 0; }

 private:
  int device_;
  std::vector<std::unique_ptr<cuda::Event>> events_;
  size_t used_ = 0;
};

class CudaBackend final : public GpuBackend {
 public:
  int device_count() const override { return cuda::device_count(); }
  std::string device_name(int device) const override { return cuda::device_name(device); }
  void synchronize(int device) const override {
    cuda::DeviceGuard guard(device);  // the caller's current device is current again afterwards
    cuda::synchronize();
  }
  void set_tf32(int device, bool enabled) const override {
    // The switch is process-wide (common/cuda/cublas.h): the device is validated, the current one left alone.
    cuda::check_device_index(device);
    cuda::set_tf32(enabled);
  }
  Allocator& allocator(int device) const override { return cuda::caching_allocator(device); }
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) const override {
    cuda::copy(dst, dst_device, src, src_device, bytes);
  }
  void memset_zero(void* dst, Device device, size_t bytes) const override { cuda::memset_zero(dst, device, bytes); }
#ifdef LAB_CUDA_EMULATION
  // The emulator has no Nsight to show ranges to.
  void range_push(const char*) const override {}
  void range_pop() const override {}
#else
  void range_push(const char* name) const override {
    nvtxRangePushA(name);
  }
  void range_pop() const override {
    nvtxRangePop();
  }
#endif
  std::unique_ptr<GpuClock> new_clock(int device) const override {
    return std::make_unique<CudaClock>(device);
  }
};

}  // namespace

const GpuBackend* gpu_backend() {
  static const CudaBackend backend;
  return &backend;
}

}  // namespace lab
