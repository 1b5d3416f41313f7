// CUDA events around the call, the L2 flushed first (see device_timing.h).
#include "common/lab/cuda_event_timing.h"

#include <algorithm>

#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::kernel_lab {

namespace {

class CudaEventTiming final : public bench::TimingBackend {
 public:
  CudaEventTiming(int device, bool flush_l2) : device_(device) {
    const cuda::DeviceGuard on(device_);
    start_ = std::make_unique<cuda::Event>();
    end_ = std::make_unique<cuda::Event>();
    if (flush_l2) {
      int l2_bytes = 0;
      CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device_));
      flush_bytes_ = std::max<size_t>(size_t{128} << 20, 2 * static_cast<size_t>(l2_bytes));
      // Straight from the runtime, not the caching allocator: the flush buffer is the harness's, and must not
      // appear in the memory accounting of the kernel under test.
      CUDA_CHECK(cudaMalloc(&flush_buffer_, flush_bytes_));
    }
  }
  ~CudaEventTiming() override {
    if (flush_buffer_) {
      const cuda::DeviceGuard on(device_);
      cudaFree(flush_buffer_);  // nothing to report from a destructor; a fault shows at the next call anyway
    }
  }
  CudaEventTiming(const CudaEventTiming&) = delete;
  CudaEventTiming& operator=(const CudaEventTiming&) = delete;

  std::string name() const override {
#ifdef LAB_CUDA_EMULATION
    return "emulated";
#else
    return "cuda_events";
#endif
  }

  double time(const std::function<void()>& work) override {
    const cuda::DeviceGuard on(device_);
    if (flush_buffer_) CUDA_CHECK(cudaMemsetAsync(flush_buffer_, 0, flush_bytes_, cuda::current_stream(device_)));
    start_->record();
    work();
    end_->record();
    return static_cast<double>(cuda::elapsed_ms(*start_, *end_)) / 1e3;
  }

 private:
  int device_;
  void* flush_buffer_ = nullptr;
  size_t flush_bytes_ = 0;
  std::unique_ptr<cuda::Event> start_, end_;
};

}  // namespace

std::unique_ptr<bench::TimingBackend> make_cuda_event_timing(int device, bool flush_l2) {
  return std::make_unique<CudaEventTiming>(device, flush_l2);
}

}  // namespace lab::kernel_lab
