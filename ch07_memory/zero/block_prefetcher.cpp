// The next block's all-gather on a thread and a communicator of its own (see block_prefetcher.h).
#include "ch07_memory/zero/block_prefetcher.h"

#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif

namespace lab::ch07 {

BlockPrefetcher::BlockPrefetcher(comm::Communicator& group) : comm_(group.split(0, group.rank())) {}

BlockPrefetcher::~BlockPrefetcher() {
  if (in_flight_.valid()) in_flight_.wait();
}

void BlockPrefetcher::start(size_t unit, Tensor buffer) {
  drop();
#ifdef LAB_WITH_CUDA
  if (buffer.device().is_cuda()) {
    cuda::DeviceGuard on(buffer.device().index);
    if (!written_) written_ = std::make_unique<cuda::Event>(false);
    written_->record();  // after the copy of this rank's part, on the training thread's stream
  }
#endif
  unit_ = unit;
  buffer_ = std::move(buffer);
  // The thread uses buffer_, which the training thread leaves alone until it has waited for the thread.
  in_flight_ = std::async(std::launch::async, [this] {
#ifdef LAB_WITH_CUDA
    if (buffer_.device().is_cuda()) {
      cuda::DeviceGuard on(buffer_.device().index);
      written_->synchronize();
      comm_->all_gather(buffer_);
      return;
    }
#endif
    comm_->all_gather(buffer_);
  });
}

Tensor BlockPrefetcher::take(size_t unit) {
  if (!in_flight_.valid() || unit_ != unit) return Tensor();
  in_flight_.get();  // rethrows the gather's error
  Tensor out = std::move(buffer_);
  buffer_ = Tensor();
  return out;
}

void BlockPrefetcher::drop() {
  if (!in_flight_.valid()) return;
  in_flight_.get();
  buffer_ = Tensor();
}

}  // namespace lab::ch07
