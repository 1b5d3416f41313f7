// The CUDA caching allocator (see caching_allocator.h): segments from cudaMalloc cut into blocks, free blocks
// found by best fit per owner stream and kind, split and merged; private pools of whole class-sized blocks; and
// freed blocks that wait for events of other streams.
#include "common/cuda/caching_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/core/error.h"
#include "common/core/tensor.h"
#include "common/cuda/block_marks.h"
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"

namespace lab::cuda {

namespace {

constexpr size_t kMinBlock = 512;                  // every block's size is a multiple of it
constexpr size_t kSmallRequest = size_t{1} << 20;  // requests up to 1 MiB are small
constexpr size_t kSegmentStep = size_t{2} << 20;   // 2 MiB: small segments, and the step of large ones

// `bytes` rounded up to a multiple of `step`.
size_t round_up(size_t bytes, size_t step) {
  return (bytes + step - 1) / step * step;
}

// The largest power of two not above `bytes` (> 0).
size_t floor_pow2(size_t bytes) {
  return size_t{1} << (63 - __builtin_clzll(bytes));
}

// The quarter-power-of-two class of a block of `size` bytes: the largest cached block a private pool's
// allocation of that class may take (see the header).
size_t reuse_limit(size_t size) {
  return round_up(size, floor_pow2(size) / 4);  // size >= kMinBlock: a step of 128 bytes at least
}

}  // namespace

size_t cuda_size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  // Largest power of two not above bytes, then the next quarter step at or above bytes; above 8 MiB the step
  // stays 2 MiB.
  return round_up(bytes, std::min(floor_pow2(bytes) / 4, kSegmentStep));
}

size_t cuda_block_size(size_t bytes) {
  return round_up(std::max<size_t>(bytes, 1), kMinBlock);
}

size_t cuda_segment_size(size_t bytes) {
  const size_t block = cuda_block_size(bytes);
  return block <= kSmallRequest ? kSegmentStep : round_up(block, kSegmentStep);
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
  explicit CudaCachingAllocator(int device) : device_(device), marks_(device) {}

  void* allocate(size_t bytes, MemCategory category) override {
    const cudaStream_t stream = current_stream(device_);
    const int pool = current_pool(device_);
    collect_finished_frees();
    // A private pool's blocks are whole size classes; the ordinary ones are cut from segments.
    const size_t size = pool ? cuda_size_class(bytes) : cuda_block_size(bytes);
    Block* block = pool ? take_from_pool(pool, size, stream) : take_free(size, stream);
    if (!block) {
      const size_t segment = pool ? size : cuda_segment_size(bytes);
      void* base = allocate_from_device(segment, bytes);
      std::lock_guard<std::mutex> lock(mutex_);
      block = add_segment(base, segment, size <= kSmallRequest, pool);
      if (!pool) marks_.on_new_segment(base, segment);
      take(block, stream);
      if (!pool) split(block, size);
    }
    if (!pool) marks_.on_take(block->ptr, bytes, block->size, stream);
    counters_.on_alloc(block->ptr, block->size, category);
    return block->ptr;
  }

  // Runs inside Storage's destructor, so it must not throw. A block used on no other stream is only
  // bookkeeping; otherwise one event is recorded per such stream. If recording fails (the device is
  // already broken, and the next checked call says so) the block is never reused.
  void deallocate(void* ptr, size_t /*bytes*/, MemCategory category) override {
    size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Block* block = live_block(ptr);
      LAB_ASSERT(block != nullptr);  // a pointer this allocator never handed out
      size = block->size;
      if (block->uses.empty()) {
        cache(block);  // which may merge it into a neighbour: not to be read after
      } else if (record_uses(*block)) {
        block->state = State::Pending;
        pending_.push_back(block);
      } else {
        block->state = State::Lost;
      }
    }
    counters_.on_free(ptr, size, category);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    Block* block = live_block(ptr);
    LAB_CHECK(block != nullptr, InvalidArgument,
              "record_stream: the tensor's memory was not handed out by the caching allocator of cuda:", device_,
              " (a wrapped buffer, or a view of one)");
    if (stream == block->owner) return;
    for (const StreamUse& use : block->uses)
      if (use.stream == stream) return;
    block->uses.push_back({stream, take_event()});
  }

  void release_stream(cudaStream_t stream) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    // The stream's free blocks leave the lists and come back as the shared pool's, merged with their free
    // neighbours; until they are back they count as taken, so that none is merged while out of the lists.
    std::vector<Block*> freed;
    for (auto it = free_.lower_bound({stream, false, 0, nullptr}); it != free_.end() && it->first.owner == stream;) {
      freed.push_back(it->second);
      it->second->state = State::Live;
      it = free_.erase(it);
    }
    for (auto& [ptr, block] : blocks_) forget(*block, stream);
    for (Block* block : freed) insert_free(block);
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
    for (auto& [size, blocks] : it->second)
      for (Block* block : blocks) {
        block->pool = 0;
        block->owner = kNoStream;
        insert_free(block);
      }
    private_.erase(it);
  }

  bool has_pool(int pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    return private_.contains(pool);
  }

  MemoryStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }
  void set_event_hook(MemoryEventHook hook) override { counters_.set_event_hook(std::move(hook)); }

  // Frees every segment that is one free block of the ordinary lists (or the shared pool's); a segment of
  // which anything is live stays, and so do the private pools' blocks.
  void empty_cache() override {
    DeviceGuard guard(device_);
    // A cached block may still be read by queued work of its stream, a pending one by another stream's:
    // wait for all of it, after which every pending block is free too.
    CUDA_CHECK(cudaDeviceSynchronize());
    collect_finished_frees();
    std::vector<std::pair<size_t, void*>> drained;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end();) {
        Block* block = it->second;
        if (block->prev != nullptr || block->next != nullptr) {
          ++it;
          continue;
        }
        drained.emplace_back(block->size, block->ptr);
        it = free_.erase(it);
        blocks_.erase(block->ptr);
      }
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
  // Live: handed out. Pending: freed, waiting for the events of its uses. Free: cached, in free_ or a private
  // pool's lists. Lost: freed when its uses could not be recorded (a broken device): never reused.
  enum class State { Free, Live, Pending, Lost };
  // A piece of a segment. prev and next are its neighbours in the segment (null at the segment's ends); a
  // segment is one block until split.
  struct Block {
    char* ptr;
    size_t size;
    bool small;  // of a small segment (requests up to 1 MiB); the two kinds never share a segment
    State state = State::Free;
    cudaStream_t owner = kNoStream;  // the stream it was allocated on (see the header)
    int pool = 0;                    // the private pool it belongs to; 0: the allocator's ordinary lists
    Block* prev = nullptr;
    Block* next = nullptr;
    std::vector<StreamUse> uses;
  };
  // The ordinary free blocks in best-fit order: per owner and kind, smallest first, then lowest address.
  struct FreeKey {
    cudaStream_t owner;
    bool small;
    size_t size;
    const char* ptr;
    bool operator<(const FreeKey& o) const {
      return std::tie(owner, small, size, ptr) < std::tie(o.owner, o.small, o.size, o.ptr);
    }
  };

  // ---------------------------------------------------------------- with mutex_ held

  static FreeKey key_of(const Block& block) { return {block.owner, block.small, block.size, block.ptr}; }

  Block* live_block(void* ptr) {
    const auto it = blocks_.find(ptr);
    return it == blocks_.end() || it->second->state != State::Live ? nullptr : it->second.get();
  }

  // A new segment of `size` bytes at `base`, as one block in no list.
  Block* add_segment(void* base, size_t size, bool small, int pool) {
    auto block = std::make_unique<Block>();
    block->ptr = static_cast<char*>(base);
    block->size = size;
    block->small = small;
    block->pool = pool;
    Block* raw = block.get();
    blocks_.emplace(base, std::move(block));
    return raw;
  }

  // `block`, out of every list, handed to `stream`.
  static void take(Block* block, cudaStream_t stream) {
    block->state = State::Live;
    block->owner = stream;
  }

  // Cuts `block` (taken) to `size` bytes; the rest, when it is a block's worth, becomes a free block of the
  // same owner, merged with a free neighbour after it.
  void split(Block* block, size_t size) {
    if (block->size - size < kMinBlock) return;
    auto rest = std::make_unique<Block>();
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->small = block->small;
    rest->owner = block->owner;
    rest->prev = block;
    rest->next = block->next;
    if (block->next) block->next->prev = rest.get();
    block->next = rest.get();
    block->size = size;
    Block* raw = rest.get();
    blocks_.emplace(raw->ptr, std::move(rest));
    insert_free(raw);
  }

  // `block`, no longer used, to its private pool's list or, merged with its free neighbours of the same owner,
  // to the ordinary free blocks.
  void cache(Block* block) {
    block->uses.clear();
    // Marked before it can be handed out again, so that its next user's bytes are cut out of the mark.
    if (block->pool == 0) marks_.on_free(block->ptr, block->size, block->owner);
    if (const auto it = private_.find(block->pool); block->pool != 0 && it != private_.end()) {
      block->state = State::Free;
      it->second[block->size].push_back(block);  // a private pool's block serves that pool only
      return;
    }
    block->pool = 0;
    insert_free(block);
  }

  // A free neighbour of the same owner joins the block, and so does one of the shared pool: nothing is queued on
  // its memory. (A neighbour owned by a stream does not join a shared block: that stream's queued work may still
  // use it.)
  void insert_free(Block* block) {
    block->state = State::Free;
    const auto mergeable = [&](const Block* other) {
      return other != nullptr && other->state == State::Free && other->pool == 0 &&
             (other->owner == block->owner || other->owner == kNoStream);
    };
    if (mergeable(block->prev)) {
      Block* prev = block->prev;
      free_.erase(key_of(*prev));
      prev->owner = block->owner;
      prev->size += block->size;
      prev->next = block->next;
      if (block->next) block->next->prev = prev;
      blocks_.erase(block->ptr);
      block = prev;
    }
    if (mergeable(block->next)) {
      Block* next = block->next;
      free_.erase(key_of(*next));
      block->size += next->size;
      block->next = next->next;
      if (next->next) next->next->prev = block;
      blocks_.erase(next->ptr);
    }
    free_.emplace(key_of(*block), block);
  }

  // The smallest free block of at least `size` bytes of the request's kind, of `stream`, else of the shared
  // pool, handed to `stream` (all of it: a shared block's rest becomes the stream's, so that the two pieces
  // merge again when the first is freed) and split to `size`; null if there is none.
  Block* take_free(size_t size, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool small = size <= kSmallRequest;
    for (const cudaStream_t owner : {stream, kNoStream}) {
      const auto it = free_.lower_bound({owner, small, size, nullptr});
      if (it == free_.end() || it->first.owner != owner || it->first.small != small) continue;
      Block* block = it->second;
      free_.erase(it);
      take(block, stream);
      split(block, size);
      return block;
    }
    return nullptr;
  }

  // From private pool `pool`'s lists: the last block freed of the smallest size in [size, reuse_limit(size)].
  // Last in, first out, so the same sequence of allocations and frees takes the same blocks.
  Block* take_from_pool(int pool, size_t size, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = private_.find(pool);
    LAB_CHECK(it != private_.end(), InvalidArgument, "PoolScope: cuda:", device_, " has no pool ", pool);
    const size_t limit = reuse_limit(size);
    for (auto list = it->second.lower_bound(size); list != it->second.end() && list->first <= limit; ++list) {
      if (list->second.empty()) continue;
      Block* block = list->second.back();
      list->second.pop_back();
      take(block, stream);
      return block;
    }
    return nullptr;
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

  // Caches every pending block whose uses have all finished.
  void collect_finished_frees() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      Block* block = *it;
      bool done = true;
      for (const StreamUse& use : block->uses) done = done && CUDA_QUERY(cudaEventQuery(use.event));
      if (!done) {
        ++it;
        continue;
      }
      for (const StreamUse& use : block->uses) spare_events_.push_back(use.event);
      cache(block);
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
           mib(static_cast<int64_t>(size)), " MiB segment); this allocator has ", mib(s.live_total), " MiB live and ",
           mib(s.reserved), " MiB reserved; the device has ", mib(static_cast<int64_t>(device_free)), " MiB free of ",
           mib(static_cast<int64_t>(device_total)), " MiB");
    }
    if (status != cudaSuccess) throw_cuda_error(status, "cudaMalloc(&ptr, size)", __FILE__, __LINE__);
    counters_.on_reserve(static_cast<int64_t>(size), true);
    return ptr;
  }

  const int device_;
  std::mutex mutex_;
  std::unordered_map<const void*, std::unique_ptr<Block>> blocks_;  // every block, by address
  std::map<FreeKey, Block*> free_;                                  // the ordinary free blocks
  std::map<int, std::map<size_t, std::vector<Block*>>> private_;    // private pools: size class -> free blocks
  int next_pool_ = 1;
  std::list<Block*> pending_;  // freed, waiting for the events of their uses
  std::vector<cudaEvent_t> spare_events_;
  BlockMarks marks_;  // AddressSanitizer's view of the blocks, in the sanitized emulation build
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
