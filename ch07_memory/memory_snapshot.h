// The memory snapshot (`gpt2_train --memory-snapshot FILE`): every allocation and free of one training step,
// in order, with its size, category and the op that made it, written as JSON; scripts/plot_memory.py draws it
// as a stacked area of live bytes by category over time, as PyTorch's memory snapshot viewer does.
//
// The recorder is the allocator's event hook (memory.h): events come in the order the allocator's counters
// saw them, so replaying them from the live bytes at the start gives the allocator's own live and peak figures
// exactly (replayed_peak() == the allocator's peak over the recording; the tests hold it to that).
//
// The file:
//   {"memory_snapshot": 1, "device": "cpu", "categories": ["params", ..., "other"],
//    "start_live": [bytes per category], "allocator_peak": bytes, "allocator_peak_by_category": [...],
//    "ops": ["linear", "linear.backward", ...],
//    "events": [[t_us, +1 alloc | -1 free, bytes, category index, op index, address], ...]}
// Addresses pair each free with its allocation; a block freed after it was allocated during the recording
// may come back at the same address later (the allocator's cache).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/core/device.h"
#include "common/core/memory.h"
#include "common/util/json.h"

namespace lab::ch07 {

class MemorySnapshot {
 public:
  explicit MemorySnapshot(Device device) : device_(device) {}
  ~MemorySnapshot();
  MemorySnapshot(const MemorySnapshot&) = delete;
  MemorySnapshot& operator=(const MemorySnapshot&) = delete;

  // Resets the allocator's peak, notes the live bytes and starts recording (events of an earlier recording are
  // dropped).
  void start();
  // Stops recording and notes the allocator's peak over the recording.
  void stop();

  struct Event {
    int64_t t_us;
    bool is_alloc;
    uint64_t address;
    int64_t bytes;
    MemCategory category;
    int op;  // index into ops()
  };
  const std::vector<Event>& events() const { return events_; }
  const std::vector<std::string>& ops() const { return ops_; }
  const std::array<int64_t, kNumMemCategories>& start_live() const { return start_live_; }
  // The allocator's peak of all categories together over the recording, and the peak the events replay to.
  int64_t allocator_peak() const { return end_stats_.peak_total; }
  int64_t replayed_peak() const;

  Json to_json() const;
  // Before any work: `path` can be written and holds nothing but an earlier snapshot (Error(Io) otherwise).
  static void check_destination(const std::string& path);
  // Writes to_json() atomically.
  void write(const std::string& path) const;

 private:
  void on_event(const MemoryEvent& e);

  Device device_;
  bool recording_ = false;
  std::chrono::steady_clock::time_point t0_;
  std::array<int64_t, kNumMemCategories> start_live_{};
  MemoryStats end_stats_;
  std::vector<Event> events_;
  std::vector<std::string> ops_;
  std::unordered_map<std::string, int> op_index_;
};

}  // namespace lab::ch07
