// Cutting the buckets into per-rank blocks (see shards.h).
#include "ch07_memory/zero/shards.h"

#include <algorithm>
#include <string>

#include "common/core/error.h"

namespace lab::ch07 {

int block_of(const ParamInfo& p) {
  if (p.name.rfind("h.", 0) != 0) return -1;
  return std::stoi(p.name.substr(2, p.name.find('.', 2) - 2));
}

bool is_embedding(const ParamInfo& p) {
  return p.name == "wte.weight" || p.name == "wpe.weight";
}

ZeroShards::ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes)
    : ZeroShards(params, ranks, rank, bucket_bytes, byte_buckets(params, bucket_bytes)) {}

std::vector<dist::GradientBucket> ZeroShards::byte_buckets(const ParameterStore& params, int64_t bucket_bytes) {
  LAB_CHECK(bucket_bytes > 0, InvalidArgument, "gradient buckets must hold at least one byte, got ", bucket_bytes);
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));  // in elements
  // The embeddings' gradients come last in backward: in a bucket with the first block's, they would keep those
  // waiting through the rest of backward.
  return dist::cut_buckets(params, [cap](const dist::GradientBucket& current, const ParamInfo& next) {
    return is_embedding(next) || next.offset + next.numel() - current.range.begin > cap;
  });
}

ZeroShards ZeroShards::per_block(const ParameterStore& params, int ranks, int rank) {
  const std::vector<ParamInfo>& infos = params.infos();
  return ZeroShards(params, ranks, rank, 0,
                    dist::cut_buckets(params, [&](const dist::GradientBucket& current, const ParamInfo& next) {
                      return block_of(next) < 0 || block_of(infos[current.params.front()]) != block_of(next);
                    }));
}

ZeroShards::ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes,
                       std::vector<dist::GradientBucket> buckets)
    : ranks_(ranks), rank_(rank), bucket_bytes_(bucket_bytes) {
  LAB_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, InvalidArgument, "ZeroShards: rank ", rank, " of ", ranks);
  for (dist::GradientBucket& b : buckets) {
    ShardedBucket s;
    // The tied embedding's blocks are whole rows, so that its gradient can be reduced rows at a time
    // (tied_embedding_gradient.h).
    const ParamInfo& first = params.infos()[b.params.front()];
    s.row = b.params.size() == 1 && first.name == "wte.weight" && first.shape.size() == 2 ? first.shape[1] : 1;
    const int64_t rows = (b.range.size() + s.row - 1) / s.row;
    s.block = (rows + ranks - 1) / ranks * s.row;
    const int64_t begin = std::min(b.range.begin + rank * s.block, b.range.end);
    s.owned = {begin, std::min(begin + s.block, b.range.end)};
    s.shard_offset = shard_numel_;
    shard_numel_ += s.owned.size();
    s.bucket = std::move(b);
    buckets_.push_back(std::move(s));
  }
}

std::vector<ElementRange> ZeroShards::owned() const {
  std::vector<ElementRange> out;
  for (const ShardedBucket& b : buckets_)
    if (b.owned.size() > 0) out.push_back(b.owned);
  return out;
}

}  // namespace lab::ch07
