// Recording the allocation timeline of a step and writing it (see memory_snapshot.h).
#include "ch07_memory/memory_snapshot.h"

#include <algorithm>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab::ch07 {

MemorySnapshot::~MemorySnapshot() {
  if (recording_) allocator_for(device_).set_event_hook({});
}

void MemorySnapshot::start() {
  Allocator& allocator = allocator_for(device_);
  allocator.set_event_hook({});
  events_.clear();
  ops_.clear();
  op_index_.clear();
  allocator.reset_peak();
  start_live_ = allocator.stats().live;
  t0_ = std::chrono::steady_clock::now();
  recording_ = true;
  // Between reading the live bytes and installing the hook another thread could allocate; the trainer and the
  // tests start recording between steps, when nothing else allocates.
  allocator.set_event_hook([this](const MemoryEvent& e) { on_event(e); });
}

void MemorySnapshot::stop() {
  if (!recording_) return;
  Allocator& allocator = allocator_for(device_);
  allocator.set_event_hook({});
  end_stats_ = allocator.stats();
  recording_ = false;
}

void MemorySnapshot::on_event(const MemoryEvent& e) {
  auto [it, added] = op_index_.try_emplace(e.op, static_cast<int>(ops_.size()));
  if (added) ops_.emplace_back(e.op);
  const auto t = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0_);
  events_.push_back({t.count(), e.is_alloc, reinterpret_cast<uint64_t>(e.ptr), e.bytes, e.category, it->second});
}

int64_t MemorySnapshot::replayed_peak() const {
  int64_t live = 0;
  for (const int64_t b : start_live_) live += b;
  int64_t peak = live;
  for (const Event& e : events_) {
    live += e.is_alloc ? e.bytes : -e.bytes;
    peak = std::max(peak, live);
  }
  return peak;
}

Json MemorySnapshot::to_json() const {
  Json j = Json::object();
  j.set("memory_snapshot", 1);
  j.set("device", device_.str());
  Json categories = Json::array(), start = Json::array(), peaks = Json::array();
  for (int i = 0; i < kNumMemCategories; ++i) {
    categories.push_back(mem_category_name(static_cast<MemCategory>(i)));
    start.push_back(start_live_[i]);
    peaks.push_back(end_stats_.peak[i]);
  }
  j.set("categories", categories);
  j.set("start_live", start);
  j.set("allocator_peak", end_stats_.peak_total);
  j.set("allocator_peak_by_category", peaks);
  Json ops = Json::array();
  for (const std::string& op : ops_) ops.push_back(op.empty() ? std::string("(no op)") : op);
  j.set("ops", ops);
  Json events = Json::array();
  for (const Event& e : events_) {
    Json row = Json::array();
    row.push_back(e.t_us);
    row.push_back(e.is_alloc ? 1 : -1);
    row.push_back(e.bytes);
    row.push_back(static_cast<int>(e.category));
    row.push_back(e.op);
    row.push_back(e.address);
    events.push_back(std::move(row));
  }
  j.set("events", events);
  return j;
}

void MemorySnapshot::check_destination(const std::string& path) {
  check_file_writable(path);
  if (!file_exists(path)) return;
  bool is_snapshot = false;
  try {
    is_snapshot = Json::parse(read_file(path)).find("memory_snapshot") != nullptr;
  } catch (const Error&) {
  }
  LAB_CHECK(is_snapshot, Io, "refusing to overwrite '", path, "': it is not a memory snapshot; give a new path");
}

void MemorySnapshot::write(const std::string& path) const {
  write_file_atomic(path, to_json().dump());
}

}  // namespace lab::ch07
