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

ZeroShards::ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes)
    : ZeroShards(ranks, rank, bucket_bytes, ch08::make_buckets(params, bucket_bytes)) {}

ZeroShards ZeroShards::per_block(const ParameterStore& params, int ranks, int rank) {
  const std::vector<ParamInfo>& infos = params.infos();
  return ZeroShards(ranks, rank, 0,
                    ch08::cut_buckets(params, [&](const ch08::GradientBucket& current, const ParamInfo& next) {
                      return block_of(next) < 0 || block_of(infos[current.params.front()]) != block_of(next);
                    }));
}

ZeroShards::ZeroShards(int ranks, int rank, int64_t bucket_bytes, std::vector<ch08::GradientBucket> buckets)
    : ranks_(ranks), rank_(rank), bucket_bytes_(bucket_bytes) {
  LAB_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, InvalidArgument, "ZeroShards: rank ", rank, " of ", ranks);
  for (ch08::GradientBucket& b : buckets) {
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
