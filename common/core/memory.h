// Memory accounting by category, and the allocator interface both backends implement.
//
// Every allocation is tagged with the category that is current on the allocating thread. A program sets
// the category with an RAII scope:
//
//     { MemoryScope scope(MemCategory::Activations); Tensor h = Tensor::empty(...); }
//
// so the allocator can report live and peak bytes per category (params, grads, optimizer state,
// activations, workspace, communication buffers). Chapter 7 builds its memory reports on these counters.
//
// A second scope, MemoryOpScope, names the operation allocating ("linear", "attention.backward"), and an
// allocator can hand every allocation and free, in the order its counters saw them, to an event hook: that
// is the timeline chapter 7's memory snapshot records.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "common/core/device.h"

namespace lab {

enum class MemCategory : uint8_t { Params, Grads, Optimizer, Activations, Workspace, Comm, Other };
inline constexpr int kNumMemCategories = 7;
const char* mem_category_name(MemCategory c);

// Sets the category for allocations made on this thread until the scope ends.
class MemoryScope {
 public:
  explicit MemoryScope(MemCategory category);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemCategory saved_;
};
MemCategory current_mem_category();

// Names the operation for allocations made on this thread until the scope ends. `op` must outlive the scope
// (a string literal).
class MemoryOpScope {
 public:
  explicit MemoryOpScope(const char* op);
  ~MemoryOpScope();
  MemoryOpScope(const MemoryOpScope&) = delete;
  MemoryOpScope& operator=(const MemoryOpScope&) = delete;

 private:
  const char* saved_;
};

// One allocation or free as the counters saw it. `bytes` is what the counters count (live bytes), so replaying
// the events from the live bytes at the start gives every later live and peak figure exactly.
struct MemoryEvent {
  bool is_alloc = true;
  const void* ptr = nullptr;
  int64_t bytes = 0;
  MemCategory category = MemCategory::Other;
  // The MemoryOpScope of the thread allocating (for a free: of the thread freeing); valid during the call only.
  const char* op = "";
};
// Called under the counters' lock, so events arrive in the counters' order; it must not allocate through the
// allocator that calls it.
using MemoryEventHook = std::function<void(const MemoryEvent&)>;

struct MemoryStats {
  std::array<int64_t, kNumMemCategories> live{};  // bytes handed out and not yet returned
  std::array<int64_t, kNumMemCategories> peak{};  // each category's own maximum of live
  int64_t live_total = 0;
  int64_t peak_total = 0;  // maximum of the sum (not the sum of the maxima)
  int64_t reserved = 0;    // bytes held from the system: live + cached free blocks
  int64_t peak_reserved = 0;
  int64_t system_allocs = 0;  // calls to the system allocator (aligned_alloc / cudaMalloc)

  int64_t live_of(MemCategory c) const { return live[static_cast<int>(c)]; }
  int64_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
  std::string table() const;  // a small human-readable table, MiB
};

// Thread-safe live/peak counters; shared by the CPU and CUDA allocators.
class MemoryCounters {
 public:
  void on_alloc(const void* ptr, size_t bytes, MemCategory c);
  void on_free(const void* ptr, size_t bytes, MemCategory c);
  void on_reserve(int64_t delta_bytes, bool system_call);
  void reset_peak();
  MemoryStats snapshot() const;
  // Installs (or, with an empty function, removes) the event hook.
  void set_event_hook(MemoryEventHook hook);

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
  MemoryEventHook hook_;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes, MemCategory category) = 0;
  virtual void deallocate(void* ptr, size_t bytes, MemCategory category) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // give cached free blocks back to the system
  // Every allocation and free from now on goes to `hook` too (an empty function stops it); see MemoryEvent.
  virtual void set_event_hook(MemoryEventHook hook) = 0;
};

// The allocator of a device. Throws Unsupported for CUDA in a CPU-only build.
Allocator& allocator_for(Device device);

// Memory statistics of a device's allocator.
inline MemoryStats memory_stats(Device device) {
  return allocator_for(device).stats();
}

}  // namespace lab
