#include "common/data/loader.h"

namespace lab {

void ensure_batch_tensors(Tensor& inputs, Tensor& targets, int64_t batch, int64_t seq, Device device) {
  const Shape shape{batch, seq};
  MemoryScope scope(MemCategory::Activations);
  for (Tensor* t : {&inputs, &targets})
    if (!t->defined() || t->shape() != shape || t->dtype() != DType::I32 || t->device() != device)
      *t = Tensor::empty(shape, DType::I32, device);
}

SyncLoader::SyncLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options)
    : plan_(shard_paths, options), buffer_(static_cast<size_t>(plan_.batch_tokens() + 1)) {}

void SyncLoader::next(Tensor& inputs, Tensor& targets) {
  const LoaderOptions& o = plan_.options();
  ensure_batch_tensors(inputs, targets, o.batch, o.seq, Device::cpu());
  uint16_t* dst = buffer_.data();
  for (const ShardPiece& piece : plan_.pieces(position_)) {
    read_shard_tokens(plan_.shards()[static_cast<size_t>(piece.shard)].path, piece.offset, piece.count, dst);
    dst += piece.count;
  }
  tokens_to_batch(buffer_.data(), o.batch, o.seq, inputs.data<int32_t>(), targets.data<int32_t>());
  ++position_;
}

void SyncLoader::seek(int64_t position) {
  LAB_CHECK(position >= 0, InvalidArgument, "loader: cannot seek to batch ", position);
  position_ = position;
}

}  // namespace lab
