// The offloaded AdamW step (AdamW with OptimizerState::Host on a GPU) cut into chunks, so that the transfers
// overlap the CPU's update (ZeRO-Offload overlaps them the same way):
//   1. an event on the compute stream after backward; a copy stream waits for it and queues every chunk's
//      gradient copy down to pinned host memory, each followed by an event of its own;
//   2. the CPU waits for chunk k's event only, updates chunk k of the master copy and the moments while the
//      later chunks are still coming down, and queues chunk k's parameters up on the copy stream behind them;
//   3. the compute stream waits on the device (the host does not) for the last upload: the step returns while
//      the last chunks go up, and the next step's first kernels, queued at once, run when every parameter is up.
// One chunk is the whole buffer done one stage after the other (down, update, up); with n chunks the CPU's
// update of each hides the transfers of the others, so a step costs about the longest of the three stages
// instead of their sum. A chunk is a range of the flat buffers; each element's arithmetic is the same whatever
// the chunks, so the result does not depend on them.
//
// The copy stream is the one ordering every transfer across steps: the next step's gradients come down only
// after this step's parameters went up (the master copy is not written while an upload still reads it).
#pragma once

#include <functional>
#include <memory>

#include "common/core/tensor.h"
#include "common/ops/element_range.h"

namespace lab {

// Elements per chunk by default: 4 Mi floats, 16 MiB each way.
inline constexpr int64_t kOffloadChunkElements = int64_t{1} << 22;

class OffloadPipeline {
 public:
  // For flat buffers of `numel` elements on the GPU `device`, in chunks of `chunk_elements` (> 0).
  OffloadPipeline(Device device, int64_t numel, int64_t chunk_elements);
  ~OffloadPipeline();
  OffloadPipeline(const OffloadPipeline&) = delete;
  OffloadPipeline& operator=(const OffloadPipeline&) = delete;

  // One step: `grads` (device) come down into `host_grads` (pinned), `update(range)` runs on the CPU over each
  // chunk's range of the host buffers once its gradients are down, and `master` (pinned) goes up into `params`
  // (device) chunk by chunk.
  void step(const Tensor& params, const Tensor& grads, const Tensor& master, const Tensor& host_grads,
            const std::function<void(const ElementRange&)>& update);
  int64_t chunks() const { return static_cast<int64_t>(ranges_.size()); }

 private:
  struct Streams;  // the copy stream and the events, CUDA only
  std::vector<ElementRange> ranges_;
  std::unique_ptr<Streams> streams_;
};

}  // namespace lab
