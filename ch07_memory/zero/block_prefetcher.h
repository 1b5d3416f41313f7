// ZeRO stage 3 with prefetch (`--zero-prefetch`): the next block's all-gather runs on a second communicator,
// on a thread of its own, while the current block computes (FSDP's forward and backward prefetch).
//
// What changes from stage 3 without it (stage3_parameters.h): when a block's weights are gathered, and on what.
// Without prefetch, block i's all-gather runs on the training thread just before block i, which waits for all
// of it. With prefetch, as soon as block i's weights are in place the gather of the block that runs next
// starts (block i+1 in forward, block i-1 in backward), and that block waits only for what is left of it when
// its turn comes. The ranks start their prefetches in the same order (every rank runs the same forward and
// backward), as collectives on one communicator require; the training thread's own collectives (the gradients'
// reduce-scatters) go on meanwhile on the group itself.
//
// The price: two blocks' weights are whole at once instead of one. When not to use it: with nothing to overlap
// on, such as CPU ranks whose cores all compute (this project's 2-core CI machine: the gather only competes
// with the compute there), or when a second block's weights do not fit.
//
// On a GPU the rank's own part of a buffer is copied into it by work queued on the compute stream: the thread
// waits for an event recorded after that copy before the all-gather reads the buffer, and the training thread
// waits for the whole gather (the collective returns once it is complete) before it queues kernels that read
// the weights.
#pragma once

#include <cstddef>
#include <future>
#include <memory>

#include "common/comm/communicator.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/stream.h"
#endif

namespace lab::ch07 {

class BlockPrefetcher {
 public:
  // Collective over `group` (it splits it).
  explicit BlockPrefetcher(comm::Communicator& group);
  // Waits for a gather still in flight; its error, if any, is dropped.
  ~BlockPrefetcher();
  BlockPrefetcher(const BlockPrefetcher&) = delete;
  BlockPrefetcher& operator=(const BlockPrefetcher&) = delete;

  // Starts the in-place all-gather of `buffer` (block rank() of it holds this rank's part, written by work
  // queued on the current stream) as `unit`'s. A gather still in flight is dropped first (drop()).
  void start(size_t unit, Tensor buffer);
  // `unit`'s gathered buffer when its gather was the last one started: waits for it, rethrowing its error.
  // Undefined otherwise (nothing is waited for then).
  Tensor take(size_t unit);
  // Waits for a gather in flight, rethrowing its error, and drops its buffer (the shards are about to change).
  void drop();

 private:
  std::unique_ptr<comm::Communicator> comm_;
  std::future<void> in_flight_;
  size_t unit_ = 0;
  Tensor buffer_;
#ifdef LAB_WITH_CUDA
  std::unique_ptr<cuda::Event> written_;  // recorded after the rank's part was queued into the buffer
#endif
};

}  // namespace lab::ch07
