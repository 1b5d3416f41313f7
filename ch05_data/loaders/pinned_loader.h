// Stage 4: stage 3's readers write into pinned host memory, and batches reach the GPU by asynchronous
// copies on a copy stream of their own, double-buffered; tokens cross the bus as u16 and are widened to
// i32 on the device. Compiled only with LAB_WITH_CUDA; make_loader() falls back to stage 3 elsewhere.
// Compiled, never run on a GPU so far.
//
// What changes from stage 3: with stages 1-3 the trainer copies each batch to the GPU itself, from
// pageable memory, on the compute stream, and the host waits for that copy. Here:
//   - the readers fill page-locked (pinned) slots, from which the GPU's copy engine reads directly, so a
//     copy is queued and returns at once instead of being staged through a driver buffer;
//   - the copy runs on a separate copy stream, so it overlaps the compute stream's kernels;
//   - double buffering: next() for batch k hands out k (its copy was queued by the previous call) and
//     queues the copy of k + 1 into the other device slot if its tokens are ready, so that copy overlaps
//     step k. Events order everything without a host synchronisation: the compute stream waits for the
//     copy of its batch ("copied"), and a device slot is overwritten only after the compute stream has
//     widened the batch it held ("consumed").
//   - u16 on the bus (half the bytes of i32), widened into the caller's i32 tensors by a small kernel on
//     the compute stream (widen_tokens.h).
// The caller's tensors are filled on the device's current stream, so work queued after next() on that
// stream sees the batch, as with any other op.
//
// When not to use it: on a CPU-only machine (nothing to copy), and when a step is so long that a plain
// synchronous copy of a few kilobytes is invisible next to it; pinned memory is taken away from the
// operating system's pager, so keep `depth` modest.
#pragma once

#include <deque>
#include <memory>

#include "ch05_data/loaders/batch_prefetcher.h"
#include "common/cuda/pinned.h"
#include "common/cuda/stream.h"
#include "common/data/loader.h"

namespace lab::ch05 {

class PinnedLoader final : public BatchLoader {
 public:
  // `device`: the GPU the batches are for (Error(InvalidArgument) for anything else).
  PinnedLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options, Device device);
  ~PinnedLoader() override;
  std::string name() const override { return "pinned"; }
  Device device() const override { return device_; }
  int64_t ready() const { return prefetcher_->ready(); }

 private:
  // One of the two device buffers of u16 tokens, with the events that guard it.
  struct DeviceSlot {
    Tensor tokens;
    std::unique_ptr<cuda::Event> copied;    // recorded on the copy stream after the copy into it
    std::unique_ptr<cuda::Event> consumed;  // recorded on the compute stream after the widening from it
  };
  // A copy queued and not yet retired: batch, pinned host slot.
  struct QueuedCopy {
    int64_t batch = 0;
    int host_slot = -1;
  };

  void fetch(int64_t k, Tensor& inputs, Tensor& targets) override;
  void restart(int64_t k) override;
  void queue_copy(int64_t batch, int host_slot);
  void retire_copies_before(int64_t k);

  Device device_;
  ShardFiles files_;
  cuda::PinnedBuffer pinned_;  // depth + 2 slots: the queue plus the two batches being copied
  std::unique_ptr<cuda::Stream> copy_stream_;
  DeviceSlot device_slots_[2];  // batch j uses slot j % 2
  std::deque<QueuedCopy> queued_;
  std::unique_ptr<BatchPrefetcher> prefetcher_;  // last: its threads stop before the buffers go away
};

}  // namespace lab::ch05
