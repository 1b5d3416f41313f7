// The allocation registry (see memory.h) and the memory calls of the runtime: allocation, attributes,
// copies and memsets.
#include "common/cuda/emulation/memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "common/cuda/emulation/addressable.h"
#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/dry_run.h"
#include "common/cuda/emulation/settings.h"
#include "common/cuda/emulation/streams.h"

namespace lab::cuda::emu {

namespace {

constexpr size_t kDeviceAlignment = 256;                // what cudaMalloc guarantees
constexpr size_t kDryRunZeroedBytes = size_t{1} << 20;  // new blocks a dry run zeroes (dry_run.h)
constexpr size_t kPinnedAlignment = 4096;

struct Registry {
  std::shared_mutex mutex;
  std::map<const std::byte*, Allocation> by_base;
  std::vector<size_t> used;  // device bytes in use, per device
};

Registry& registry() {
  static Registry* const r = [] {
    auto* created = new Registry;
    created->used.resize(static_cast<size_t>(device_count()));
    return created;
  }();
  return *r;
}

size_t round_up(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

std::optional<Allocation> find_locked(const Registry& r, const void* ptr) {
  const auto* p = static_cast<const std::byte*>(ptr);
  auto it = r.by_base.upper_bound(p);
  if (it == r.by_base.begin()) return std::nullopt;
  --it;
  if (p > it->second.base + it->second.bytes) return std::nullopt;
  return it->second;
}

// Removes the allocation starting exactly at `ptr` if it has `kind`, and returns it; nullopt when there is none.
// What the caching allocator marked as not addressable (addressable.h) becomes addressable again.
std::optional<Allocation> unregister(const void* ptr, MemoryKind kind) {
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  const auto it = r.by_base.find(static_cast<const std::byte*>(ptr));
  if (it == r.by_base.end() || it->second.kind != kind) return std::nullopt;
  const Allocation removed = it->second;
  set_addressable(const_cast<std::byte*>(removed.base), removed.bytes, true);
  if (kind == MemoryKind::Device)
    r.used[static_cast<size_t>(removed.device)] -= round_up(removed.bytes, kDeviceAlignment);
  r.by_base.erase(it);
  return removed;
}

// A dry run's block above kDryRunZeroedBytes, never touched: mapped with MAP_NORESERVE, so that the host's
// overcommit accounting does not refuse a block larger than its memory (a 25 GB logits buffer of a large batch
// on a 24 GB machine) that no page of will ever be written. Null when the mapping fails.
std::byte* map_untouched(size_t size) {
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<std::byte*>(memory);
}

void synchronize_all_devices(const char* call) {
  for (int d = 0; d < device_count(); ++d) synchronize_device(d, call);
}

// Where a copy's pointer lands: its allocation, if any, must hold the whole range.
struct Side {
  std::optional<Allocation> allocation;
  bool valid = true;
};

Side locate(const void* ptr, size_t bytes) {
  Side side{find_allocation(ptr), true};
  if (side.allocation && !inside(*side.allocation, ptr, bytes)) side.valid = false;
  return side;
}

bool is_device(const Side& side) {
  return side.allocation && side.allocation->kind == MemoryKind::Device;
}

bool is_pageable(const Side& side) {
  return !side.allocation;
}

}  // namespace

std::optional<Allocation> find_allocation(const void* ptr) {
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  return find_locked(r, ptr);
}

bool inside(const Allocation& allocation, const void* ptr, size_t bytes) {
  const auto* p = static_cast<const std::byte*>(ptr);
  return p >= allocation.base && bytes <= allocation.bytes && p <= allocation.base + (allocation.bytes - bytes);
}

bool address_sanitizer() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  return false;
#endif
}

void set_addressable(void* ptr, size_t bytes, bool addressable) {
#if defined(__SANITIZE_ADDRESS__)
  if (addressable)
    ASAN_UNPOISON_MEMORY_REGION(ptr, bytes);
  else
    ASAN_POISON_MEMORY_REGION(ptr, bytes);
#else
  static_cast<void>(ptr), static_cast<void>(bytes), static_cast<void>(addressable);
#endif
}

}  // namespace lab::cuda::emu

// ---------------------------------------------------------------- the runtime calls

using namespace lab::cuda::emu;

// New device memory is filled with 0xff bytes (NaN as float, -1 as int): a kernel that reads memory
// nobody wrote gets numbers nobody could mistake for results.
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (ptr == nullptr) return record(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  // A graph replays its work on the memory it was captured with: no allocation may happen while one is made.
  if (const cudaError_t refused = refuse_during_capture(nullptr, -1, cudaErrorStreamCaptureUnsupported);
      refused != cudaSuccess)
    return refused;
  if (const cudaError_t sticky = sticky_error(device); sticky != cudaSuccess) return record(sticky);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  if (bytes > settings().device_memory_bytes) return record(cudaErrorMemoryAllocation);
  const size_t size = round_up(bytes, kDeviceAlignment);
  Registry& r = registry();
  {
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    size_t& used = r.used[static_cast<size_t>(device)];
    if (size > settings().device_memory_bytes - used) return record(cudaErrorMemoryAllocation);
    used += size;  // reserved now, so that two threads cannot both take the last bytes
  }
  const bool dry = dry_run(), mapped = dry && size > kDryRunZeroedBytes;
  auto* memory = mapped ? map_untouched(size) : static_cast<std::byte*>(std::aligned_alloc(kDeviceAlignment, size));
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  if (memory == nullptr) {
    r.used[static_cast<size_t>(device)] -= size;
    return record(cudaErrorMemoryAllocation);
  }
  r.by_base.emplace(memory, Allocation{memory, bytes, MemoryKind::Device, device, mapped});
  lock.unlock();
  if (!dry)
    std::memset(memory, 0xff, size);
  else if (!mapped)
    std::memset(memory, 0, size);  // larger blocks stay untouched (dry_run.h)
  *ptr = memory;
  return cudaSuccess;
}

// Waits for the device first, as cudaFree does: queued kernels may still use the memory.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  if (const cudaError_t refused = refuse_during_capture(nullptr, -1, cudaErrorStreamCaptureUnsupported);
      refused != cudaSuccess)
    return refused;
  synchronize_all_devices("cudaFree");
  const std::optional<Allocation> removed = unregister(ptr, MemoryKind::Device);
  if (!removed) return record(cudaErrorInvalidValue);
  if (removed->mapped)
    munmap(ptr, round_up(removed->bytes, kDeviceAlignment));
  else
    std::free(ptr);
  return record(sticky_error(device));
}

// Waits for every device first: a page-locked allocation is one of the CUDA programming guide's implicit
// synchronisations (work of different streams cannot overlap across it), and drivers wait for the device
// there. Code that allocates pinned memory while a stream waits for the host would hang on a GPU.
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  constexpr unsigned kKnown = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (ptr == nullptr || (flags & ~kKnown) != 0) return record(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  if (const cudaError_t sticky = sticky_error(device); sticky != cudaSuccess) return record(sticky);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  synchronize_all_devices("cudaHostAlloc");
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(kPinnedAlignment, round_up(bytes, kPinnedAlignment)));
  if (memory == nullptr) return record(cudaErrorMemoryAllocation);
  Registry& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  r.by_base.emplace(memory, Allocation{memory, bytes, MemoryKind::Pinned, device});
  *ptr = memory;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

// Waits for every device first, as cudaFreeHost does: queued copies may still read the buffer.
cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  synchronize_all_devices("cudaFreeHost");
  if (!unregister(ptr, MemoryKind::Pinned)) return record(cudaErrorInvalidValue);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return record(cudaErrorInvalidValue);
  const int device = current_device();
  if (!valid_device(device)) return record(cudaErrorNoDevice);
  Registry& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  *total_bytes = settings().device_memory_bytes;
  *free_bytes = *total_bytes - r.used[static_cast<size_t>(device)];
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return record(cudaErrorInvalidValue);
  const std::optional<Allocation> allocation = find_allocation(ptr);
  void* const address = const_cast<void*>(ptr);
  if (!allocation) {
    // Memory the runtime does not know: CUDA 11 and later answer "unregistered" rather than fail.
    *attributes = cudaPointerAttributes{cudaMemoryTypeUnregistered, -2, nullptr, address};
  } else if (allocation->kind == MemoryKind::Device) {
    *attributes = cudaPointerAttributes{cudaMemoryTypeDevice, allocation->device, address, nullptr};
  } else {
    *attributes = cudaPointerAttributes{cudaMemoryTypeHost, allocation->device, address, address};
  }
  return cudaSuccess;
}

// A copy runs on the stream's thread in order with the stream's other work. When either side is pageable
// host memory, the call returns only after the copy has run, as on a GPU (where such a copy is staged
// through a driver buffer); from and to pinned memory it returns at once. A copy from the device into
// pageable memory is completed by the runtime's host-function thread (streams.h), so it waits for a host
// function that is running on any stream.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t handle) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = sticky_error(stream_device(*stream)); sticky != cudaSuccess) return record(sticky);
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return record(cudaErrorInvalidValue);
  const Side to = locate(dst, bytes);
  const Side from = locate(src, bytes);
  if (!to.valid || !from.valid) return record(cudaErrorInvalidValue);  // runs past the end of its allocation
  const bool wants_device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool wants_device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((wants_device_dst && !is_device(to)) || (wants_device_src && !is_device(from)))
    return record(cudaErrorInvalidValue);
  const bool to_pageable = is_pageable(to) && is_device(from);
  // Pageable memory makes the call wait for the copy: a synchronisation a capture cannot contain.
  if (is_pageable(to) || is_pageable(from)) {
    if (const cudaError_t refused = refuse_during_capture(stream, -1, cudaErrorStreamCaptureUnsupported);
        refused != cudaSuccess)
      return refused;
  }
  if (dry_run() && is_device(to) && is_device(from)) {
    enqueue(*stream, [] {});  // checked, not run (dry_run.h)
    return cudaSuccess;
  }
  const uint64_t ticket = enqueue(*stream, [dst, src, bytes, to_pageable] {
    if (to_pageable)
      run_on_runtime_thread([&] { std::memmove(dst, src, bytes); });
    else
      std::memmove(dst, src, bytes);
  });
  if (is_pageable(to) || is_pageable(from))
    wait_for(*stream, ticket, "cudaMemcpy(Async) from or to pageable host memory");
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t error = cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamLegacy); error != cudaSuccess)
    return error;
  return cudaStreamSynchronize(cudaStreamLegacy);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t handle) {
  CUstream_st* stream = resolve_stream(handle);
  if (stream == nullptr) return record(cudaErrorInvalidResourceHandle);
  if (const cudaError_t sticky = sticky_error(stream_device(*stream)); sticky != cudaSuccess) return record(sticky);
  if (bytes == 0) return cudaSuccess;
  const Side target = locate(ptr, bytes);
  if (!target.allocation || !target.valid) return record(cudaErrorInvalidValue);
  if (dry_run())
    enqueue(*stream, [] {});  // checked, not run (dry_run.h)
  else
    enqueue(*stream, [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (const cudaError_t error = cudaMemsetAsync(ptr, value, bytes, cudaStreamLegacy); error != cudaSuccess)
    return error;
  return cudaStreamSynchronize(cudaStreamLegacy);
}
