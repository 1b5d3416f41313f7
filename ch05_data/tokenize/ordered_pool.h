// An ordered parallel map with a bounded window: the calling thread produces items and consumes results in
// production order, while `threads` workers transform items in between.
//
// At most `window` items are in flight (produced, not yet consumed); the producer waits for the consumer
// beyond that. This is what bounds memory: a slow consumer or one slow item cannot make the producer read
// ahead without limit. Results are held in `window` slots (item i in slot i % window) until their turn, so
// the output order, and with it every byte written, is the same whatever the number of threads.
//
// An exception in a worker is rethrown on the calling thread when that item's turn comes; an exception in
// produce or consume stops the workers (they finish their current item) before it propagates.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/core/error.h"

namespace lab::ch05 {

template <typename In, typename Out>
void run_ordered(int threads, int window, const std::function<bool(In*)>& produce,
                 const std::function<Out(In&)>& transform, const std::function<void(Out&)>& consume) {
  LAB_CHECK(threads >= 1 && window >= 1, InvalidArgument, "run_ordered: threads (", threads, ") and window (", window,
            ") must be at least 1");
  struct Slot {
    std::optional<Out> result;
    std::exception_ptr error;
    bool ready = false;
  };
  std::mutex mutex;
  std::condition_variable work_ready, result_ready;
  std::deque<std::pair<int64_t, In>> queue;
  std::vector<Slot> slots(window);
  bool closing = false;

  const auto worker = [&] {
    while (true) {
      std::unique_lock lock(mutex);
      work_ready.wait(lock, [&] { return closing || !queue.empty(); });
      if (closing) return;
      auto [index, item] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      Slot done;
      try {
        done.result.emplace(transform(item));
      } catch (...) {
        done.error = std::current_exception();
      }
      done.ready = true;
      lock.lock();
      slots[index % window] = std::move(done);
      result_ready.notify_all();
    }
  };

  // Stops and joins the workers however this function is left.
  struct Workers {
    std::vector<std::thread> threads;
    std::function<void()> stop;
    ~Workers() {
      stop();
      for (auto& t : threads) t.join();
    }
  } workers{{}, [&] {
              std::lock_guard lock(mutex);
              closing = true;
              work_ready.notify_all();
            }};
  for (int t = 0; t < threads; ++t) workers.threads.emplace_back(worker);

  int64_t produced = 0, consumed = 0;
  bool input_left = true;
  while (true) {
    while (input_left && produced - consumed < window) {
      In item;
      input_left = produce(&item);
      if (!input_left) break;
      std::lock_guard lock(mutex);
      queue.emplace_back(produced++, std::move(item));
      work_ready.notify_one();
    }
    if (consumed == produced) return;
    Slot slot;
    {
      std::unique_lock lock(mutex);
      Slot& next = slots[consumed % window];
      result_ready.wait(lock, [&] { return next.ready; });
      slot = std::move(next);
      next = Slot{};
    }
    ++consumed;
    if (slot.error) std::rethrow_exception(slot.error);
    consume(*slot.result);
  }
}

}  // namespace lab::ch05
