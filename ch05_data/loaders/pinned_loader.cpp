#include "ch05_data/loaders/pinned_loader.h"

#include "ch05_data/loaders/prefetch_loader.h"
#include "ch05_data/loaders/widen_tokens.h"
#include "common/cuda/check.h"
#include "common/cuda/runtime.h"

namespace lab::ch05 {

namespace {

constexpr int kDeviceSlots = 2;

}  // namespace

PinnedLoader::PinnedLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options, Device device)
    : BatchLoader(shard_paths, options), device_(device), files_(plan().shards()) {
  LAB_CHECK(device.is_cuda(), InvalidArgument, "pinned loader: batches go to a GPU, not to ", device.str());
  cuda::check_device_index(device.index);
  cuda::DeviceGuard on(device.index);
  const int64_t slot_tokens = plan().batch_tokens() + 1;
  const int host_slots = options.depth + kDeviceSlots;
  pinned_ = cuda::PinnedBuffer(static_cast<size_t>(host_slots * slot_tokens) * sizeof(uint16_t));
  copy_stream_ = std::make_unique<cuda::Stream>(device.index);
  {
    // The device slots are written on the copy stream, so they are allocated there (caching_allocator.h).
    cuda::StreamGuard on_copy(*copy_stream_);
    MemoryScope scope(MemCategory::Activations);
    for (DeviceSlot& slot : device_slots_) {
      slot.tokens = Tensor::empty({slot_tokens}, DType::U16, device);
      slot.copied = std::make_unique<cuda::Event>(false);
      slot.consumed = std::make_unique<cuda::Event>(false);
    }
  }
  prefetcher_ = std::make_unique<BatchPrefetcher>(plan(), files_,
                                                  carve_slots(pinned_.as<uint16_t>().data(), host_slots, slot_tokens));
}

// The members then go in reverse order: the copy stream's destructor waits for its copies before the
// pinned buffer is freed.
PinnedLoader::~PinnedLoader() {
  prefetcher_.reset();  // stop the readers first: they write into the pinned slots
  // The compute stream may still be widening from a device slot: wait before the slots are freed. An
  // error here cannot be thrown from a destructor; the next CUDA call reports it.
  try {
    for (DeviceSlot& slot : device_slots_) slot.consumed->synchronize();
  } catch (const Error&) {
  }
}

void PinnedLoader::queue_copy(int64_t batch, int host_slot) {
  DeviceSlot& slot = device_slots_[batch % kDeviceSlots];
  copy_stream_->wait(*slot.consumed);  // the batch this slot held two batches ago has been widened
  {
    cuda::StreamGuard on_copy(*copy_stream_);
    cuda::copy_async(slot.tokens.raw(), device_, prefetcher_->tokens(host_slot), Device::cpu(), slot.tokens.nbytes());
  }
  slot.copied->record(*copy_stream_);
  queued_.push_back({batch, host_slot});
}

void PinnedLoader::retire_copies_before(int64_t k) {
  while (!queued_.empty() && queued_.front().batch < k) {
    // That batch was handed out and widened after its copy, so this wait is normally already over.
    device_slots_[queued_.front().batch % kDeviceSlots].copied->synchronize();
    prefetcher_->release(queued_.front().host_slot);
    queued_.pop_front();
  }
}

void PinnedLoader::fetch(int64_t k, Tensor& inputs, Tensor& targets) {
  const LoaderOptions& o = plan().options();
  cuda::DeviceGuard on(device_.index);
  retire_copies_before(k);
  if (queued_.empty()) queue_copy(k, prefetcher_->take(k));  // the previous call could not queue it early
  LAB_ASSERT(queued_.front().batch == k);

  DeviceSlot& slot = device_slots_[k % kDeviceSlots];
  ensure_batch_tensors(inputs, targets, o.batch, o.seq, device_);
  CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(device_.index), slot.copied->get(), 0));
  widen_tokens_on_device(slot.tokens, inputs, targets);
  slot.consumed->record();

  // Double buffering: start the next batch's copy now, so that it overlaps this step.
  if (const std::optional<int> next = prefetcher_->try_take(k + 1)) queue_copy(k + 1, *next);
}

void PinnedLoader::restart(int64_t k) {
  copy_stream_->synchronize();
  for (const QueuedCopy& c : queued_) prefetcher_->release(c.host_slot);
  queued_.clear();
  prefetcher_->restart(k);
}

}  // namespace lab::ch05
