#include "common/data/loader.h"

namespace lab {

void ensure_batch_tensors(Tensor& inputs, Tensor& targets, int64_t batch, int64_t seq, Device device) {
  const Shape shape{batch, seq};
  MemoryScope scope(MemCategory::Activations);
  for (Tensor* t : {&inputs, &targets})
    if (!t->defined() || t->shape() != shape || t->dtype() != DType::I32 || t->device() != device)
      *t = Tensor::empty(shape, DType::I32, device);
}

// ---------------------------------------------------------------- BatchLoader

BatchLoader::BatchLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options)
    : plan_(shard_paths, options) {}

void BatchLoader::next(Tensor& inputs, Tensor& targets) {
  fetch(position_, inputs, targets);
  const int64_t per_epoch = plan_.batches_per_epoch();
  if (position_ > 0 && position_ % per_epoch == 0) {
    const LoaderOptions& o = plan_.options();
    report(o, cat("data: ", name(), " loader: epoch ", plan_.epoch_of(position_), " begins at batch ", position_, " (",
                  per_epoch, " batches per epoch for rank ", o.rank, " of ", o.world, ")"));
  }
  ++position_;
}

void BatchLoader::seek(int64_t position) {
  LAB_CHECK(position >= 0, InvalidArgument, "loader: cannot seek to batch ", position);
  restart(position);
  position_ = position;
}

// ---------------------------------------------------------------- SyncLoader

SyncLoader::SyncLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options)
    : BatchLoader(shard_paths, options), files_(plan().shards()) {}

void SyncLoader::fetch(int64_t k, Tensor& inputs, Tensor& targets) {
  read_batch_here(plan(), k, files_, buffer_, inputs, targets);
}

void read_batch_here(const BatchPlan& plan, int64_t k, const TokenSource& source, std::vector<uint16_t>& buffer,
                     Tensor& inputs, Tensor& targets) {
  const LoaderOptions& o = plan.options();
  buffer.resize(static_cast<size_t>(plan.batch_tokens() + 1));
  gather_batch(plan, k, source, buffer.data());
  o.slow.pay();
  ensure_batch_tensors(inputs, targets, o.batch, o.seq, Device::cpu());
  tokens_to_batch(buffer.data(), o.batch, o.seq, inputs.data<int32_t>(), targets.data<int32_t>());
}

}  // namespace lab
