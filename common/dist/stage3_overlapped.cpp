// Stage 3: bucket all-reduces started from gradient hooks during backward, run by a communication thread on a
// second communicator (see stage3_overlapped.h).
#include "common/dist/stage3_overlapped.h"

#include "common/bench/timer.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"
#include "common/cuda/stream.h"
#endif

namespace lab::dist {

// ---------------------------------------------------------------- gradients written, on the device

// On a GPU a hook runs when the kernels writing the gradient are queued, not done: the marker records an
// event on the compute stream then, and the communication thread makes its stream wait for it.
struct OverlappedAllReduce::ReadyMarker {
#ifdef LAB_WITH_CUDA
  explicit ReadyMarker(Device device) : device(device) {
    if (device.is_cuda()) {
      cuda::DeviceGuard on(device.index);
      event = std::make_unique<cuda::Event>(false);
      stream = std::make_unique<cuda::Stream>(device.index);
    }
  }
  void mark() const {  // on the thread running backward
    if (event) event->record();
  }
  // On the communication thread: what follows on this thread's current stream waits for the mark.
  std::unique_ptr<cuda::StreamGuard> wait() const {
    if (!event) return nullptr;
    stream->wait(*event);
    return std::make_unique<cuda::StreamGuard>(*stream);
  }
  Device device;
  std::unique_ptr<cuda::Event> event;
  std::unique_ptr<cuda::Stream> stream;
#else
  explicit ReadyMarker(Device) {}
  void mark() const {}
  bool wait() const {
    return true;
  }
#endif
};

// Queued on the device: the one stream every bucket's all-reduce runs on (so that they keep the order of the
// communicator's calls), and the event the compute stream waits for at the end.
struct OverlappedAllReduce::SideStream {
#ifdef LAB_WITH_CUDA
  explicit SideStream(Device device) : stream(device.index) {
    const cuda::DeviceGuard on(device.index);  // the event is made on the stream's device
    reduced = std::make_unique<cuda::Event>(false);
  }
  cuda::Stream stream;
  std::unique_ptr<cuda::Event> reduced;
#else
  explicit SideStream(Device) {
    fail(ErrorKind::Unsupported, "the overlapped stage queues its all-reduces on a CUDA stream: a build with CUDA");
  }
#endif
};

// ---------------------------------------------------------------- the main thread

OverlappedAllReduce::OverlappedAllReduce(comm::Communicator& group, ParameterStore& params, int64_t bucket_bytes)
    : GradientReducer(group, params),
      buckets_(make_buckets(params, bucket_bytes)),
      bucket_of_(params.infos().size()),
      comm_(group.split(0, group.rank())),
      waiting_for_(buckets_.size()),
      final_(params.infos().size()),
      started_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (const size_t p : buckets_[b].params) bucket_of_[p] = b;
    ready_.push_back(std::make_unique<ReadyMarker>(params.device()));
  }
  for (size_t p = 0; p < params.infos().size(); ++p)
    params.var(params.infos()[p].name).set_gradient_hook([this, p] { on_gradient_final(p); });
  thread_ = std::thread([this] { communicate(); });
}

OverlappedAllReduce::~OverlappedAllReduce() {
  for (const ParamInfo& p : params_.infos()) params_.var(p.name).set_gradient_hook({});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void OverlappedAllReduce::before_last_backward() {
  GradientReducer::before_last_backward();
  for (size_t b = 0; b < buckets_.size(); ++b) waiting_for_[b] = static_cast<int>(buckets_[b].params.size());
  final_.assign(final_.size(), false);
  started_.assign(started_.size(), false);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = 0;
  }
  listening_ = true;
}

void OverlappedAllReduce::on_gradient_final(size_t param) {
  if (!listening_ || final_[param]) return;
  final_[param] = true;
  const size_t b = bucket_of_[param];
  if (--waiting_for_[b] == 0) {
    start(b);
    ++stats_.started_during_backward;
  }
}

void OverlappedAllReduce::queue_on_device() {
  LAB_CHECK(params_.device().is_cuda(), InvalidArgument,
            "the overlapped stage queues its all-reduces on a CUDA stream; the gradients are on ",
            params_.device().str());
  comm_->queue_where_able();
  side_ = std::make_unique<SideStream>(params_.device());
}

void OverlappedAllReduce::wait_queued() {
  comm_->wait_queued();
}

void OverlappedAllReduce::start(size_t bucket) {
  started_[bucket] = true;
  ready_[bucket]->mark();
  if (side_) {
    queue_all_reduce(bucket);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(bucket);
  }
  wake_.notify_all();
}

void OverlappedAllReduce::reduce() {
  listening_ = false;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!started_[b]) start(b);
#ifdef LAB_WITH_CUDA
  if (side_) {  // the join: what the step queues next waits for the last all-reduce
    side_->reduced->record(side_->stream);
    CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(params_.device().index), side_->reduced->get(), 0));
    return;
  }
#endif
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return done_ == buckets_.size() || error_; });
  if (error_) std::rethrow_exception(error_);
}

void OverlappedAllReduce::queue_all_reduce([[maybe_unused]] size_t bucket) {
#ifdef LAB_WITH_CUDA
  side_->stream.wait(*ready_[bucket]->event);  // the fork: the bucket's gradients are written before this
  const cuda::StreamGuard on(side_->stream);
  const ElementRange& r = buckets_[bucket].range;
  average(*comm_, params_.grads().view(r.begin, {r.size()}));
#endif
}

// ---------------------------------------------------------------- the communication thread

void OverlappedAllReduce::communicate() {
  for (;;) {
    size_t bucket = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      bucket = queue_.front();
      queue_.pop_front();
      if (error_) continue;  // the communicator is broken: nothing more can be sent
    }
    try {
      const ElementRange& r = buckets_[bucket].range;
      [[maybe_unused]] const auto on_stream = ready_[bucket]->wait();
      average(*comm_, params_.grads().view(r.begin, {r.size()}));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++done_;
    }
    wake_.notify_all();
  }
}

}  // namespace lab::dist
