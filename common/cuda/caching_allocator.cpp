#include "common/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

size_t cuda_size_class(size_t bytes) {
  constexpr size_t kMinBlock = 512;
  if (bytes <= kMinBlock) return kMinBlock;
  // Largest power of two not above bytes, then the next quarter step at or above bytes.
  const size_t pow2 = size_t{1} << (63 - __builtin_clzll(bytes));
  if (pow2 == bytes) return bytes;
  const size_t quarter = pow2 / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

namespace {

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}

  void* allocate(size_t bytes, MemCategory category) override {
    const size_t size = cuda_size_class(bytes);
    const cudaStream_t stream = current_stream(device_);
    void* ptr = take_cached(size, stream);
    if (!ptr) ptr = allocate_from_device(size, bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[ptr] = Block{size, stream};
    }
    counters_.on_alloc(size, category);
    return ptr;
  }

  // Only bookkeeping: no CUDA call, so nothing here can fail on a healthy process (this runs inside
  // Storage's destructor).
  void deallocate(void* ptr, size_t /*bytes*/, MemCategory category) override {
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = live_.find(ptr);
      LAB_ASSERT(it != live_.end());  // a pointer this allocator never handed out
      const Block block = it->second;
      live_.erase(it);
      free_[{block.stream, block.size}].push_back(ptr);
      size = block.size;
    }
    counters_.on_free(size, category);
  }

  MemoryStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }

  void empty_cache() override {
    std::map<std::pair<cudaStream_t, size_t>, std::vector<void*>> drained;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drained.swap(free_);
    }
    if (drained.empty()) return;
    DeviceGuard guard(device_);
    // A cached block may still be read by queued work of its stream (see the header); wait for it all.
    CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [key, blocks] : drained) {
      for (void* p : blocks) CUDA_CHECK(cudaFree(p));
      counters_.on_reserve(-static_cast<int64_t>(key.second * blocks.size()), false);
    }
  }

 private:
  struct Block {
    size_t size;
    cudaStream_t stream;
  };

  void* take_cached(size_t size, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = free_.find({stream, size});
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* ptr = it->second.back();
    it->second.pop_back();
    return ptr;
  }

  void* allocate_from_device(size_t size, size_t requested) {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // an allocation failure is not sticky: clear it and retry with an empty cache
      empty_cache();
      status = cudaMalloc(&ptr, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t device_free = 0, device_total = 0;
      if (cudaMemGetInfo(&device_free, &device_total) != cudaSuccess) cudaGetLastError();
      const MemoryStats s = counters_.snapshot();
      fail(ErrorKind::Cuda, "CUDA out of memory on cuda:", device_, " allocating ", requested, " bytes (a ",
           mib(static_cast<int64_t>(size)), " MiB block); this allocator has ", mib(s.live_total), " MiB live and ",
           mib(s.reserved), " MiB reserved; the device has ", mib(static_cast<int64_t>(device_free)), " MiB free of ",
           mib(static_cast<int64_t>(device_total)), " MiB");
    }
    if (status != cudaSuccess) throw_cuda_error(status, "cudaMalloc(&ptr, size)", __FILE__, __LINE__);
    counters_.on_reserve(static_cast<int64_t>(size), true);
    return ptr;
  }

  const int device_;
  std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<std::pair<cudaStream_t, size_t>, std::vector<void*>> free_;  // (stream, size class) -> blocks
  MemoryCounters counters_;
};

}  // namespace

Allocator& caching_allocator(int device) {
  check_device_index(device);
  // One per visible device, created together on first use and never destroyed: blocks may be returned
  // by static objects during exit, after any destructor of ours would have run.
  static const std::vector<CudaCachingAllocator*> allocators = [] {
    std::vector<CudaCachingAllocator*> all;
    for (int d = 0; d < device_count(); ++d) all.push_back(new CudaCachingAllocator(d));
    return all;
  }();
  return *allocators[static_cast<size_t>(device)];
}

}  // namespace lab::cuda
