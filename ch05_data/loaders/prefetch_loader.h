// Stage 3: background reader threads with a bounded queue (BatchPrefetcher).
//
// What changes from stage 2: the caller's thread no longer reads. `workers` threads read the next
// batches (with positioned reads, as stage 1 does) while the model trains on the current one, up to
// `depth` batches ahead; next() takes the oldest and widens its u16 tokens into the i32 tensors. As long
// as the readers together deliver a batch faster than a training step consumes one, the step finds its
// batch ready and the data stall disappears, however slow each single read is. Errors of a reader
// surface in next() for the batch that failed, as the original exception.
//
// Why positioned reads and not the mapping of stage 2: in a background thread a read's system call
// costs nothing that matters, while a mapped file that shrinks kills the process (SIGBUS) instead of
// raising an error in the reader.
//
// When not to use it: when a step is much longer than a read (the stall is already negligible, and handing
// each batch between threads costs more than a fast read from the page cache), and when the per-batch
// CPU work is heavy and the cores are few: readers then compete with the training step for the cores,
// and the step slows down by about what the stall saved (chapter 5's benchmark shows it on a 2-core
// machine). It also costs `depth` batches of memory and, after a seek, the batches read ahead are thrown
// away.
#pragma once

#include "ch05_data/loaders/batch_prefetcher.h"
#include "common/data/loader.h"

namespace lab::ch05 {

class PrefetchLoader final : public BatchLoader {
 public:
  PrefetchLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options);
  std::string name() const override { return "prefetch"; }
  // Batches read and waiting (for tests and diagnostics).
  int64_t ready() const { return prefetcher_.ready(); }

 private:
  void fetch(int64_t k, Tensor& inputs, Tensor& targets) override;
  void restart(int64_t k) override { prefetcher_.restart(k); }

  ShardFiles files_;
  std::vector<uint16_t> slot_memory_;  // depth + 1 slots: the queue plus the batch being widened
  BatchPrefetcher prefetcher_;         // last: its threads stop before the members they use go away
};

// Host slots of `size` tokens each, carved out of `memory`.
std::vector<uint16_t*> carve_slots(uint16_t* memory, int count, int64_t size);

}  // namespace lab::ch05
