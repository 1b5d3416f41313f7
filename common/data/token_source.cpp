#include "common/data/token_source.h"

#include "common/core/error.h"

namespace lab {

void check_shard_size(const ShardInfo& info, int64_t bytes) {
  const int64_t expected = kShardHeaderBytes + 2 * info.num_tokens;
  LAB_CHECK(bytes == expected, Format, "shard '", info.path, "' is ", bytes, " bytes, but its header said ",
            info.num_tokens, " tokens (", expected, " bytes) when the split was listed");
}

ShardFiles::ShardFiles(const std::vector<ShardInfo>& shards) {
  for (const ShardInfo& info : shards) {
    files_.push_back(std::make_unique<InputFile>(info.path));
    check_shard_size(info, files_.back()->size());
  }
}

void ShardFiles::read(const ShardPiece& piece, uint16_t* dst) const {
  const InputFile& file = *files_[static_cast<size_t>(piece.shard)];
  file.read_at(kShardHeaderBytes + 2 * piece.offset, dst, static_cast<size_t>(piece.count) * sizeof(uint16_t));
}

void gather_batch(const BatchPlan& plan, int64_t k, const TokenSource& source, uint16_t* dst) {
  for (const ShardPiece& piece : plan.pieces(k)) {
    source.read(piece, dst);
    dst += piece.count;
  }
}

}  // namespace lab
