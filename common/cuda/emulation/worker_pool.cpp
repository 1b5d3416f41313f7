#include "common/cuda/emulation/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cuda/emulation/settings.h"

namespace lab::cuda::emu {

namespace {

struct Job {
  uint64_t count = 0;
  const std::function<bool(uint64_t)>* body = nullptr;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stopped{false};
  int helpers_inside = 0;  // guarded by the pool's mutex
};

// Takes indices of `job` until none is left (or a call asked to stop).
void work_on(Job& job) {
  while (!job.stopped.load(std::memory_order_relaxed)) {
    const uint64_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.count) return;
    if (!(*job.body)(i)) job.stopped.store(true, std::memory_order_relaxed);
  }
}

class ThreadPool {
 public:
  explicit ThreadPool(int helpers) {
    for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] { help(); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void run(uint64_t count, const std::function<bool(uint64_t)>& body) {
    if (count == 0) return;
    Job job;
    job.count = count;
    job.body = &body;
    const bool share = count > 1 && !helpers_.empty();
    if (share) {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(&job);
      work_.notify_all();
    }
    work_on(job);
    if (!share) return;
    std::unique_lock<std::mutex> lock(mutex_);
    withdraw(job);
    left_.wait(lock, [&] { return job.helpers_inside == 0; });
  }

 private:
  // Takes `job` off the list so that no helper joins it any more (callers hold the mutex).
  void withdraw(Job& job) {
    const auto it = std::find(jobs_.begin(), jobs_.end(), &job);
    if (it != jobs_.end()) jobs_.erase(it);
  }

  void help() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] { return !jobs_.empty(); });
      Job& job = *jobs_.front();
      ++job.helpers_inside;
      lock.unlock();
      work_on(job);
      lock.lock();
      withdraw(job);  // nothing left to take: do not come back to it
      if (--job.helpers_inside == 0) left_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable left_;
  std::vector<Job*> jobs_;
  std::vector<std::thread> helpers_;
};

}  // namespace

void run_parallel(uint64_t count, const std::function<bool(uint64_t)>& body) {
  // Never destroyed: the helpers wait on its mutex until the process ends.
  static ThreadPool* const pool = new ThreadPool(settings().workers - 1);
  pool->run(count, body);
}

}  // namespace lab::cuda::emu
