// The CUDA caching allocator (see caching_allocator.h): free lists keyed by (owner stream, size class), a
// shared pool for the blocks of destroyed streams, and freed blocks that wait for events of other streams.
#include "common/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/core/tensor.h"
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

namespace {

constexpr size_t kMinBlock = 512;
constexpr size_t kLargeStep = size_t{2} << 20;  // 2 MiB: the step of the classes above 8 MiB

// `bytes` rounded up to a multiple of `step`.
size_t round_up(size_t bytes, size_t step) {
  return (bytes + step - 1) / step * step;
}

// The largest power of two not above `bytes` (> 0).
size_t floor_pow2(size_t bytes) {
  return size_t{1} << (63 - __builtin_clzll(bytes));
}

// The quarter-power-of-two class of a block of `size` bytes: the largest cached block an allocation of that
// class may take (see the header).
size_t reuse_limit(size_t size) {
  return round_up(size, floor_pow2(size) / 4);  // size >= kMinBlock: a step of 128 bytes at least
}

}  // namespace

size_t cuda_size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  // Largest power of two not above bytes, then the next quarter step at or above bytes; above 8 MiB the step
  // stays 2 MiB.
  return round_up(bytes, std::min(floor_pow2(bytes) / 4, kLargeStep));
}

namespace {

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// The owner of a block whose stream has been destroyed: any stream may take it. current_stream() never
// returns a null handle (it starts as cudaStreamLegacy), so null cannot be confused with a live stream.
const cudaStream_t kNoStream = nullptr;

// The calling thread's private pool per device (PoolScope); 0: none.
thread_local std::map<int, int> t_pool;

int current_pool(int device) {
  const auto it = t_pool.find(device);
  return it == t_pool.end() ? 0 : it->second;
}

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}

  void* allocate(size_t bytes, MemCategory category) override {
    size_t size = cuda_size_class(bytes);  // becomes the size of the cached block taken, if one is
    const cudaStream_t stream = current_stream(device_);
    const int pool = current_pool(device_);
    collect_finished_frees();
    void* ptr = pool ? take_from_pool(pool, size) : take_cached(size, stream);
    if (!ptr) ptr = allocate_from_device(size, bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[ptr] = Block{size, stream, {}, pool};
    }
    counters_.on_alloc(ptr, size, category);
    return ptr;
  }

  // Runs inside Storage's destructor, so it must not throw. A block used on no other stream is only
  // bookkeeping; otherwise one event is recorded per such stream. If recording fails (the device is
  // already broken, and the next checked call says so) the block is never reused.
  void deallocate(void* ptr, size_t /*bytes*/, MemCategory category) override {
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = live_.find(ptr);
      LAB_ASSERT(it != live_.end());  // a pointer this allocator never handed out
      Block block = std::move(it->second);
      live_.erase(it);
      size = block.size;
      if (block.uses.empty()) {
        cache(ptr, block);
      } else if (record_uses(block)) {
        pending_.push_back({ptr, std::move(block)});
      }
    }
    counters_.on_free(ptr, size, category);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(ptr);
    LAB_CHECK(it != live_.end(), InvalidArgument,
              "record_stream: the tensor's memory was not handed out by the caching allocator of cuda:", device_,
              " (a wrapped buffer, or a view of one)");
    Block& block = it->second;
    if (stream == block.owner) return;
    for (const StreamUse& use : block.uses)
      if (use.stream == stream) return;
    block.uses.push_back({stream, take_event()});
  }

  void release_stream(cudaStream_t stream) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto first = free_.lower_bound({stream, 0});
    auto last = first;
    for (; last != free_.end() && last->first.first == stream; ++last) {
      std::vector<void*>& shared = pool_[last->first.second];
      shared.insert(shared.end(), last->second.begin(), last->second.end());
    }
    free_.erase(first, last);
    for (auto& [ptr, block] : live_) forget(block, stream);
    for (PendingFree& pending : pending_) {
      if (pending.block.owner == stream) pending.block.owner = kNoStream;
    }
  }

  int create_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int id = next_pool_++;
    private_[id];
    return id;
  }

  void release_pool(int pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = private_.find(pool);
    LAB_CHECK(it != private_.end(), InvalidArgument, "release_private_pool: cuda:", device_, " has no pool ", pool);
    for (auto& [size, blocks] : it->second) pool_[size].insert(pool_[size].end(), blocks.begin(), blocks.end());
    private_.erase(it);
  }

  bool has_pool(int pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    return private_.contains(pool);
  }

  MemoryStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }
  void set_event_hook(MemoryEventHook hook) override { counters_.set_event_hook(std::move(hook)); }

  void empty_cache() override {
    DeviceGuard guard(device_);
    // A cached block may still be read by queued work of its stream, a pending one by another stream's:
    // wait for all of it, after which every pending block is free too.
    CUDA_CHECK(cudaDeviceSynchronize());
    collect_finished_frees();
    std::vector<std::pair<size_t, void*>> drained;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [key, blocks] : free_)
        for (void* p : blocks) drained.emplace_back(key.second, p);
      for (const auto& [size, blocks] : pool_)
        for (void* p : blocks) drained.emplace_back(size, p);
      free_.clear();
      pool_.clear();
    }
    for (const auto& [size, p] : drained) {
      CUDA_CHECK(cudaFree(p));
      counters_.on_reserve(-static_cast<int64_t>(size), false);
    }
  }

 private:
  // A stream other than the owner that uses a block, and the event that marks the end of that use.
  struct StreamUse {
    cudaStream_t stream;
    cudaEvent_t event;
  };
  struct Block {
    size_t size;
    cudaStream_t owner;
    std::vector<StreamUse> uses;
    int pool = 0;  // the private pool it belongs to; 0: the allocator's ordinary lists
  };
  struct PendingFree {
    void* ptr;
    Block block;
  };

  // ---------------------------------------------------------------- with mutex_ held

  void cache(void* ptr, const Block& block) {
    if (const auto it = private_.find(block.pool); block.pool != 0 && it != private_.end()) {
      it->second[block.size].push_back(ptr);  // a private pool's block serves that pool only
    } else if (block.owner == kNoStream) {
      pool_[block.size].push_back(ptr);
    } else {
      free_[{block.owner, block.size}].push_back(ptr);
    }
  }

  // A cached block for an allocation of class `size` on `stream`: the stream's own, else the shared pool's, the
  // smallest of at least `size` and at most reuse_limit(size) bytes; `size` becomes the block's. Null if none.
  void* take_cached(size_t& size, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t limit = reuse_limit(size);
    for (auto it = free_.lower_bound({stream, size});
         it != free_.end() && it->first.first == stream && it->first.second <= limit; ++it)
      if (void* ptr = pop(it->second, size, it->first.second)) return ptr;
    return take_smallest_fit(pool_, size);
  }

  // The same from private pool `pool`'s lists.
  void* take_from_pool(int pool, size_t& size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = private_.find(pool);
    LAB_CHECK(it != private_.end(), InvalidArgument, "PoolScope: cuda:", device_, " has no pool ", pool);
    return take_smallest_fit(it->second, size);
  }

  // From lists keyed by size: the last block freed of the smallest size in [size, reuse_limit(size)]; `size`
  // becomes its size. Last in, first out, so the same sequence of allocations and frees takes the same blocks.
  static void* take_smallest_fit(std::map<size_t, std::vector<void*>>& lists, size_t& size) {
    const size_t limit = reuse_limit(size);
    for (auto it = lists.lower_bound(size); it != lists.end() && it->first <= limit; ++it)
      if (void* ptr = pop(it->second, size, it->first)) return ptr;
    return nullptr;
  }

  // The last block of `list`, with `size` set to `block_size`; null for an empty list.
  static void* pop(std::vector<void*>& list, size_t& size, size_t block_size) {
    if (list.empty()) return nullptr;
    void* ptr = list.back();
    list.pop_back();
    size = block_size;
    return ptr;
  }

  // An event of this device for marking a use, from the spares when there is one.
  cudaEvent_t take_event() {
    if (!spare_events_.empty()) {
      const cudaEvent_t event = spare_events_.back();
      spare_events_.pop_back();
      return event;
    }
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  // Records each use's event on its stream; false when one cannot be recorded. Never throws.
  bool record_uses(const Block& block) noexcept {
    int saved = -1;
    const bool switched =
        cudaGetDevice(&saved) == cudaSuccess && saved != device_ && cudaSetDevice(device_) == cudaSuccess;
    bool recorded = true;
    for (const StreamUse& use : block.uses)
      recorded = recorded && cudaEventRecord(use.event, use.stream) == cudaSuccess;
    if (switched) cudaSetDevice(saved);
    return recorded;
  }

  // `stream` is gone and its work has finished: `block` no longer waits for it nor belongs to it.
  void forget(Block& block, cudaStream_t stream) noexcept {
    if (block.owner == stream) block.owner = kNoStream;
    const auto used =
        std::find_if(block.uses.begin(), block.uses.end(), [&](const StreamUse& use) { return use.stream == stream; });
    if (used == block.uses.end()) return;
    spare_events_.push_back(used->event);
    block.uses.erase(used);
  }

  // ---------------------------------------------------------------- taking mutex_ themselves

  // Moves every pending block whose uses have all finished to its free list (or the pool).
  void collect_finished_frees() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (const StreamUse& use : it->block.uses) done = done && CUDA_QUERY(cudaEventQuery(use.event));
      if (!done) {
        ++it;
        continue;
      }
      for (const StreamUse& use : it->block.uses) spare_events_.push_back(use.event);
      it->block.uses.clear();
      cache(it->ptr, it->block);
      it = pending_.erase(it);
    }
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
  std::map<std::pair<cudaStream_t, size_t>, std::vector<void*>> free_;  // (owner, size class) -> blocks
  std::map<size_t, std::vector<void*>> pool_;                           // blocks of destroyed streams
  std::map<int, std::map<size_t, std::vector<void*>>> private_;         // private pools: size class -> blocks
  int next_pool_ = 1;
  std::list<PendingFree> pending_;  // freed, waiting for the events of their uses
  std::vector<cudaEvent_t> spare_events_;
  MemoryCounters counters_;
};

CudaCachingAllocator& allocator_of(int device) {
  check_device_index(device);
  // One per visible device, created together on first use and never destroyed: blocks may be returned
  // by static objects during exit, after any destructor of ours would have run. The list itself is never
  // destroyed either, so the allocators stay reachable from a global to the end (LeakSanitizer's rule).
  static const std::vector<CudaCachingAllocator*>* const allocators = [] {
    auto* all = new std::vector<CudaCachingAllocator*>;
    for (int d = 0; d < device_count(); ++d) all->push_back(new CudaCachingAllocator(d));
    return all;
  }();
  return *(*allocators)[static_cast<size_t>(device)];
}

}  // namespace

Allocator& caching_allocator(int device) {
  return allocator_of(device);
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  LAB_CHECK(tensor.defined() && tensor.device() == Device::cuda(stream.device()), InvalidArgument,
            "record_stream: the tensor must live on the stream's device, cuda:", stream.device());
  allocator_of(stream.device()).record_stream(tensor.storage()->data(), stream.get());
}

void release_stream(int device, cudaStream_t stream) noexcept {
  if (device < 0 || device >= device_count()) return;
  allocator_of(device).release_stream(stream);
}

int create_private_pool(int device) {
  return allocator_of(device).create_pool();
}

void release_private_pool(int device, int pool) {
  allocator_of(device).release_pool(pool);
}

PoolScope::PoolScope(int device, int pool) : device_(device), saved_(current_pool(device)) {
  LAB_CHECK(allocator_of(device).has_pool(pool), InvalidArgument, "PoolScope: cuda:", device, " has no pool ", pool);
  t_pool[device] = pool;
}

PoolScope::~PoolScope() {
  t_pool[device_] = saved_;
}

}  // namespace lab::cuda
