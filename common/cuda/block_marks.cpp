// The caching allocator's AddressSanitizer marks (see block_marks.h).
#include "common/cuda/block_marks.h"

#include <algorithm>

#if defined(LAB_CUDA_EMULATION)
#include "common/cuda/emulation/addressable.h"
#endif

namespace lab::cuda {

namespace {

void set_addressable(char* begin, char* end, bool addressable) {
#if defined(LAB_CUDA_EMULATION)
  if (begin < end) emu::set_addressable(begin, static_cast<size_t>(end - begin), addressable);
#else
  static_cast<void>(begin), static_cast<void>(end), static_cast<void>(addressable);
#endif
}

}  // namespace

bool BlockMarks::active() {
#if defined(LAB_CUDA_EMULATION)
  return emu::address_sanitizer();
#else
  return false;
#endif
}

void BlockMarks::on_new_segment(void* base, size_t size) {
  if (!active()) return;
  char* begin = static_cast<char*>(base);
  set_addressable(begin, begin + size, false);
}

void BlockMarks::on_take(void* ptr, size_t requested, size_t size, cudaStream_t owner) {
  if (!active()) return;
  char* begin = static_cast<char*>(ptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cut(begin, begin + size);
    set_addressable(begin, begin + requested, true);
  }
  mark_after_queued_work(begin + requested, begin + size, owner);
}

void BlockMarks::on_free(void* ptr, size_t size, cudaStream_t owner) {
  if (!active()) return;
  char* begin = static_cast<char*>(ptr);
  mark_after_queued_work(begin, begin + size, owner);
}

void BlockMarks::mark_after_queued_work(char* begin, char* end, cudaStream_t owner) {
  if (begin >= end) return;
  if (owner == nullptr) {  // the stream was destroyed after its work had run
    set_addressable(begin, end, false);
    return;
  }
#if defined(LAB_CUDA_EMULATION)
  auto mark = std::make_shared<Mark>();
  mark->ranges.emplace_back(begin, end);
  // Queued with mutex_ held, so that a block handed out meanwhile is cut out of this mark.
  std::lock_guard<std::mutex> lock(mutex_);
  const auto made = [this, mark] {
    std::lock_guard<std::mutex> made_lock(mutex_);
    for (const auto& [b, e] : mark->ranges) set_addressable(b, e, false);
    queued_.remove(mark);
  };
  if (emu::after_queued_work(device_, owner, made)) queued_.push_back(std::move(mark));
#endif
}

void BlockMarks::cut(char* begin, char* end) {
  const auto overlaps = [&](const std::pair<char*, char*>& range) { return range.second > begin && range.first < end; };
  for (const std::shared_ptr<Mark>& mark : queued_) {
    if (std::none_of(mark->ranges.begin(), mark->ranges.end(), overlaps)) continue;
    std::vector<std::pair<char*, char*>> kept;
    for (const auto& [b, e] : mark->ranges) {
      if (e <= begin || b >= end) {
        kept.emplace_back(b, e);
        continue;
      }
      if (b < begin) kept.emplace_back(b, begin);
      if (e > end) kept.emplace_back(end, e);
    }
    mark->ranges = std::move(kept);
  }
}

}  // namespace lab::cuda
