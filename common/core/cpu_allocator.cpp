#include "common/core/cpu_allocator.h"

#include <cstdlib>
#include <map>
#include <vector>

#include "common/core/error.h"

namespace lab {

size_t cpu_size_class(size_t bytes) {
  constexpr size_t kMinBlock = 64;
  constexpr size_t kLarge = size_t{1} << 20;
  if (bytes <= kMinBlock) return kMinBlock;
  // Large blocks: whole MiBs (at most 1 MiB of slack, and the untouched tail of a block is never paged in).
  if (bytes >= kLarge) return (bytes + kLarge - 1) / kLarge * kLarge;
  // Small blocks: the next quarter step above a power of two (at most 25% slack, few distinct sizes).
  const size_t pow2 = size_t{1} << (63 - __builtin_clzll(bytes));
  if (pow2 == bytes) return bytes;
  const size_t quarter = pow2 / 4;
  // aligned_alloc wants a multiple of the alignment (64): below 256 bytes a quarter step is not one.
  const size_t stepped = (bytes + quarter - 1) / quarter * quarter;
  return (stepped + kMinBlock - 1) / kMinBlock * kMinBlock;
}

namespace {

class CpuCachingAllocator final : public Allocator {
 public:
  CpuCachingAllocator() {
    const char* env = std::getenv("LAB_CPU_CACHE_MB");
    cache_cap_ = (env ? std::strtoull(env, nullptr, 10) : 1024ull) << 20;
  }
  ~CpuCachingAllocator() override { empty_cache(); }

  void* allocate(size_t bytes, MemCategory category) override {
    const size_t size = cpu_size_class(bytes);
    void* ptr = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        ptr = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= size;
      }
    }
    if (!ptr) {
      ptr = std::aligned_alloc(64, size);
      if (!ptr) {  // give the cache back and try once more before failing
        empty_cache();
        ptr = std::aligned_alloc(64, size);
      }
      LAB_CHECK(ptr, Io, "out of host memory allocating ", size, " bytes");
      counters_.on_reserve(static_cast<int64_t>(size), true);
    }
    counters_.on_alloc(ptr, bytes, category);  // live bytes are what was asked for; reserved bytes include slack
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes, MemCategory category) override {
    const size_t size = cpu_size_class(bytes);
    counters_.on_free(ptr, bytes, category);
    bool over_cap = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_[size].push_back(ptr);
      cached_bytes_ += size;
      over_cap = cached_bytes_ > cache_cap_;
    }
    if (over_cap) empty_cache();
  }

  MemoryStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }
  void set_event_hook(MemoryEventHook hook) override { counters_.set_event_hook(std::move(hook)); }

  void empty_cache() override {
    std::map<size_t, std::vector<void*>> drained;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drained.swap(free_);
      cached_bytes_ = 0;
    }
    for (auto& [size, blocks] : drained) {
      for (void* p : blocks) std::free(p);
      counters_.on_reserve(-static_cast<int64_t>(size * blocks.size()), false);
    }
  }

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_bytes_ = 0;
  size_t cache_cap_ = 0;
  MemoryCounters counters_;
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuCachingAllocator* allocator = new CpuCachingAllocator();  // never destroyed: outlives statics
  return *allocator;
}

}  // namespace lab
