#include "common/core/memory.h"

#include <algorithm>
#include <cstdio>

#include "common/core/cpu_allocator.h"
#include "common/core/error.h"
#include "common/core/gpu_backend.h"

namespace lab {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Params: return "params";
    case MemCategory::Grads: return "grads";
    case MemCategory::Optimizer: return "optimizer";
    case MemCategory::Activations: return "activations";
    case MemCategory::Workspace: return "workspace";
    case MemCategory::Comm: return "comm";
    case MemCategory::Other: return "other";
  }
  return "?";
}

namespace {
thread_local MemCategory t_current_category = MemCategory::Other;
}

MemoryScope::MemoryScope(MemCategory category) : saved_(t_current_category) {
  t_current_category = category;
}
MemoryScope::~MemoryScope() {
  t_current_category = saved_;
}
MemCategory current_mem_category() {
  return t_current_category;
}

namespace {
thread_local const char* t_current_op = "";
}

MemoryOpScope::MemoryOpScope(const char* op) : saved_(t_current_op) {
  t_current_op = op;
}
MemoryOpScope::~MemoryOpScope() {
  t_current_op = saved_;
}

std::string MemoryStats::table() const {
  std::string out;
  char line[128];
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  std::snprintf(line, sizeof line, "%-12s %12s %12s\n", "category", "live MiB", "peak MiB");
  out += line;
  for (int i = 0; i < kNumMemCategories; ++i) {
    if (live[i] == 0 && peak[i] == 0) continue;
    std::snprintf(line, sizeof line, "%-12s %12.1f %12.1f\n", mem_category_name(static_cast<MemCategory>(i)),
                  mib(live[i]), mib(peak[i]));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-12s %12.1f %12.1f\n%-12s %12.1f %12.1f\n", "total", mib(live_total),
                mib(peak_total), "reserved", mib(reserved), mib(peak_reserved));
  out += line;
  return out;
}

void MemoryCounters::on_alloc(const void* ptr, size_t bytes, MemCategory c) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int i = static_cast<int>(c);
  stats_.live[i] += static_cast<int64_t>(bytes);
  stats_.peak[i] = std::max(stats_.peak[i], stats_.live[i]);
  stats_.live_total += static_cast<int64_t>(bytes);
  stats_.peak_total = std::max(stats_.peak_total, stats_.live_total);
  if (hook_) hook_({true, ptr, static_cast<int64_t>(bytes), c, t_current_op});
}

void MemoryCounters::on_free(const void* ptr, size_t bytes, MemCategory c) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live[static_cast<int>(c)] -= static_cast<int64_t>(bytes);
  stats_.live_total -= static_cast<int64_t>(bytes);
  if (hook_) hook_({false, ptr, static_cast<int64_t>(bytes), c, t_current_op});
}

void MemoryCounters::set_event_hook(MemoryEventHook hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hook_ = std::move(hook);
}

void MemoryCounters::on_reserve(int64_t delta_bytes, bool system_call) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.reserved += delta_bytes;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  if (system_call) stats_.system_allocs += 1;
}

void MemoryCounters::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.live;
  stats_.peak_total = stats_.live_total;
  stats_.peak_reserved = stats_.reserved;
}

MemoryStats MemoryCounters::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return require_gpu_backend(cat("device ", device.str())).allocator(device.index);
}

}  // namespace lab
