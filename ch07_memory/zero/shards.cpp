// Cutting the buckets into per-rank blocks (see shards.h).
#include "ch07_memory/zero/shards.h"

#include <algorithm>

#include "common/core/error.h"

namespace lab::ch07 {

ZeroShards::ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes)
    : ranks_(ranks), rank_(rank), bucket_bytes_(bucket_bytes) {
  LAB_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, InvalidArgument, "ZeroShards: rank ", rank, " of ", ranks);
  for (ch08::GradientBucket& b : ch08::make_buckets(params, bucket_bytes)) {
    ShardedBucket s;
    s.block = (b.range.size() + ranks - 1) / ranks;
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
