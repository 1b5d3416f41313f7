// Data parallelism, stage 3: overlapped. Each bucket's all-reduce starts during backward, as soon as the
// last of its gradients is final, and runs while backward computes the next layers' gradients; the step then
// waits only for what is left (PyTorch DDP's default; Megatron's overlap_grad_reduce).
//
// What changes from stage 2: when, and on what. The buckets are the same; a gradient hook on every parameter
// (common/autograd/var.h: it runs once the tape has run the last backward step that adds to the parameter's
// gradient; wte's runs after its second contribution, the embedding's, at the very end) counts down its
// bucket, and the bucket that reaches zero goes to a communication thread. That thread all-reduces it on a
// second communicator (a split of the data-parallel group: one thread at a time may use a communicator), so
// the main thread goes on with backward at once. On a GPU the hook records an event on the compute stream and
// the thread makes its all-reduce wait for it (the gradient is written by queued kernels, not yet in memory
// when the hook runs); NCCL then runs on its own stream, beside the compute kernels. finish() hands over the
// buckets no hook completed (a parameter that received no gradient) and waits for the thread.
//
// With gradient accumulation only the last micro-batch's backward starts all-reduces: the earlier ones add
// to gradients that are not final yet (DataParallelStep calls before_last_backward() at the right moment).
//
// Buckets complete in the same order on every rank (every rank runs the same backward), so the ranks make
// their collectives in the same order, as communicators require.
//
// Queued on the device (a step captured in a CUDA graph, queue_on_device()): no communication thread. A hook's
// bucket goes straight onto a side stream, which waits for the bucket's event on the compute stream (a fork
// into the capture) and all-reduces it there, queued (comm::Communicator::set_queued); finish() makes the compute
// stream wait for the side stream's last all-reduce (the join). The GPU then overlaps the all-reduces with
// backward by itself, and the graph holds both streams' work.
//
// When not to use it: when there is nothing to overlap with. A single-core rank (or ranks oversubscribing
// their cores, as 4 ranks on this project's 2-core CI machine) has no core for the communication thread
// while backward runs: the all-reduces then only steal time from backward, and stage 2 is as fast or faster.
// Also when backward is short compared with the all-reduce (tiny models, slow links): little can be hidden.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/dist/buckets.h"
#include "common/dist/gradient_reducer.h"

namespace lab::dist {

class OverlappedAllReduce : public GradientReducer {
 public:
  // Collective over `group` (it splits it). Sets a gradient hook on every parameter of `params`.
  OverlappedAllReduce(comm::Communicator& group, ParameterStore& params, int64_t bucket_bytes);
  // Stops the communication thread and removes the hooks.
  ~OverlappedAllReduce() override;

  void before_last_backward() override;
  void queue_on_device() override;
  void wait_queued() override;
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

 protected:
  void reduce() override;

 private:
  struct ReadyMarker;  // a CUDA event per bucket on a GPU; nothing on the CPU
  struct SideStream;   // queued on the device: the stream of the all-reduces, and the event that joins it back

  void on_gradient_final(size_t param);
  void start(size_t bucket);             // hands the bucket to the communication thread
  void communicate();                    // the communication thread's loop
  void queue_all_reduce(size_t bucket);  // queued on the device: the bucket's all-reduce on the side stream

  std::vector<GradientBucket> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter (index into infos())
  std::unique_ptr<comm::Communicator> comm_;
  std::vector<std::unique_ptr<ReadyMarker>> ready_;  // per bucket
  std::unique_ptr<SideStream> side_;                 // set by queue_on_device()

  // The main thread's state for the step (the hooks run on the thread running backward).
  bool listening_ = false;
  std::vector<int> waiting_for_;  // per bucket: its parameters whose gradient is not final yet
  std::vector<bool> final_;       // per parameter
  std::vector<bool> started_;     // per bucket

  // Shared with the communication thread.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<size_t> queue_;
  size_t done_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace lab::dist
