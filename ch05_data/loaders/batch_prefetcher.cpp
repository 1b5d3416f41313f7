#include "ch05_data/loaders/batch_prefetcher.h"

#include "common/core/error.h"

namespace lab::ch05 {

BatchPrefetcher::BatchPrefetcher(const BatchPlan& plan, const TokenSource& source, std::vector<uint16_t*> slots)
    : plan_(plan), source_(source), slots_(std::move(slots)), depth_(plan.options().depth) {
  LAB_CHECK(static_cast<int64_t>(slots_.size()) > depth_, InvalidArgument, "prefetcher: ", slots_.size(),
            " slots cannot hold ", depth_, " batches read ahead plus the consumer's");
  for (int s = static_cast<int>(slots_.size()) - 1; s >= 0; --s) free_slots_.push_back(s);
  try {
    for (int w = 0; w < plan.options().workers; ++w) threads_.emplace_back([this] { read_loop(); });
  } catch (...) {  // a thread could not be started: stop the ones that were
    stop();
    throw;
  }
}

BatchPrefetcher::~BatchPrefetcher() {
  stop();
}

void BatchPrefetcher::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void BatchPrefetcher::read_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || (next_claim_ < consumer_ + depth_ && !free_slots_.empty()); });
    if (stopping_) return;
    const int64_t k = next_claim_++;
    const uint64_t generation = generation_;
    Filed filed{free_slots_.back(), nullptr};
    free_slots_.pop_back();
    lock.unlock();
    try {
      gather_batch(plan_, k, source_, slots_[static_cast<size_t>(filed.slot)]);
      plan_.options().slow.pay();
    } catch (...) {
      filed.error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) {  // restarted meanwhile: nobody will take this batch
      free_slots_.push_back(filed.slot);
      work_.notify_one();
      continue;
    }
    if (filed.error) {  // the error travels alone; the slot goes back at once
      free_slots_.push_back(filed.slot);
      filed.slot = -1;
      work_.notify_one();
    }
    done_[k] = std::move(filed);
    filed_.notify_one();  // the only waiter is the consumer
  }
}

int BatchPrefetcher::take_filed(int64_t k, std::unique_lock<std::mutex>& lock) {
  const auto it = done_.find(k);
  // A failed batch stays filed: it remains the consumer's next, and asking again reports it again.
  if (it->second.error) std::rethrow_exception(it->second.error);
  const int slot = it->second.slot;
  done_.erase(it);
  consumer_ = k + 1;
  lock.unlock();
  work_.notify_one();  // the window moved by one: one more batch may be claimed (waking all would be a herd)
  return slot;
}

int BatchPrefetcher::take(int64_t k) {
  std::unique_lock lock(mutex_);
  LAB_ASSERT(k == consumer_);
  filed_.wait(lock, [&] { return done_.count(k) > 0; });
  return take_filed(k, lock);
}

std::optional<int> BatchPrefetcher::try_take(int64_t k) {
  std::unique_lock lock(mutex_);
  LAB_ASSERT(k == consumer_);
  const auto it = done_.find(k);
  if (it == done_.end() || it->second.error) return std::nullopt;
  return take_filed(k, lock);
}

void BatchPrefetcher::release(int slot) {
  {
    std::lock_guard lock(mutex_);
    free_slots_.push_back(slot);
  }
  work_.notify_one();
}

void BatchPrefetcher::restart(int64_t k) {
  {
    std::lock_guard lock(mutex_);
    ++generation_;
    for (const auto& [index, filed] : done_)
      if (filed.slot >= 0) free_slots_.push_back(filed.slot);
    done_.clear();
    consumer_ = k;
    next_claim_ = k;
  }
  work_.notify_all();
}

int64_t BatchPrefetcher::ready() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(done_.size());
}

}  // namespace lab::ch05
