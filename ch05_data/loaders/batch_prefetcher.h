// Background readers with a bounded, ordered queue: the machinery of stages 3 and 4.
//
// `workers` threads read batches k, k+1, k+2, ... of a BatchPlan into host slots while the consumer
// trains on earlier ones. Each worker claims the next unclaimed batch, reads it (paying the simulated
// slow source on its own thread) and files it under its batch index, so batches finish in any order but
// are taken strictly in order. Two bounds keep it honest:
//   - depth: a batch is claimed only while it is fewer than `depth` batches ahead of the consumer, so
//     the readers never run further ahead than that (memory, and wasted work after a seek);
//   - slots: the host buffers are allocated once (by the owner, which chooses ordinary or pinned memory)
//     and recycled, never allocated per batch.
// A reader that fails files the exception under that batch's index; take() rethrows it, unchanged, when
// the consumer reaches that batch. restart() discards everything read or being read (a generation count
// tells late readers that their batch is stale). The destructor stops and joins the threads; a reader
// in the middle of a batch finishes it first.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/data/token_source.h"

namespace lab::ch05 {

class BatchPrefetcher {
 public:
  // `slots`: host buffers of plan.batch_tokens() + 1 tokens each, more than plan.options().depth of them
  // (the surplus is what the consumer may hold at once); the owner keeps them, `plan` and `source` alive
  // longer than the prefetcher. Readers start at batch 0.
  BatchPrefetcher(const BatchPlan& plan, const TokenSource& source, std::vector<uint16_t*> slots);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Waits for batch k, which must be the batch after the last one taken (or the restart point), and
  // returns its slot; the consumer owns the slot until release(). Rethrows the reader's error for k (again
  // on every call, until a restart()).
  int take(int64_t k);
  // take(k) when batch k has been read successfully already; otherwise returns nothing at once (and a
  // later take(k) waits for it, or reports its error).
  std::optional<int> try_take(int64_t k);
  void release(int slot);
  // Drops every batch read ahead (or being read) and continues from batch k.
  void restart(int64_t k);

  const uint16_t* tokens(int slot) const { return slots_[static_cast<size_t>(slot)]; }
  // Batches read and waiting for the consumer (for tests and diagnostics).
  int64_t ready() const;

 private:
  struct Filed {
    int slot = -1;
    std::exception_ptr error;
  };
  void read_loop();
  void stop();  // tells the readers to stop and joins them
  int take_filed(int64_t k, std::unique_lock<std::mutex>& lock);

  const BatchPlan& plan_;
  const TokenSource& source_;
  std::vector<uint16_t*> slots_;
  const int64_t depth_;

  mutable std::mutex mutex_;
  std::condition_variable work_;   // a reader may claim a batch, or should stop
  std::condition_variable filed_;  // a batch has been filed
  std::vector<int> free_slots_;
  std::map<int64_t, Filed> done_;  // batch index -> its slot or its error
  int64_t consumer_ = 0;           // the next batch take() expects
  int64_t next_claim_ = 0;         // the next batch a reader claims
  uint64_t generation_ = 0;        // bumped by restart(): readers holding an older one drop their batch
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace lab::ch05
