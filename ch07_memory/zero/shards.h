// ZeRO's shards: which elements of the flat buffers each rank of a data-parallel group owns.
//
// The flat buffer is cut into the data-parallel buckets (common/dist/buckets.h: whole parameters in
// backward order, at most bucket_bytes unless one parameter is larger), with the embeddings (wpe, and the tied
// wte) in buckets of their own, and each bucket into one block per rank, as a reduce-scatter or an all-gather
// of that bucket cuts it: a bucket of n elements is padded to a multiple of the group's size D and rank r owns
// block r, elements [r c, (r + 1) c) with c = ceil(n / D) (the last ranks' blocks may reach into the padding,
// or lie in it entirely); the tied embedding's blocks are whole rows, c = ceil(Vp / D) C. A rank's shard is
// its block of every bucket: about 1/D of the buffer, spread over the model, so that each bucket's gradients
// can be reduce-scattered, and its parameters all-gathered, as soon as the bucket is complete (DeepSpeed's ZeRO
// cuts its partitions the same way from its buckets).
//
// Stage 3 cuts the buffer into other buckets (per_block): one per transformer block and one per parameter
// outside the blocks, the units it gathers whole when they are used; each is cut into per-rank blocks the same
// way.
//
// A rank's moments (AdamW constructed with owned()) and its gradient shard (and under stage 3 its parameter
// shard) hold its blocks' real elements one after the other, in buffer order.
#pragma once

#include <cstdint>
#include <vector>

#include "common/dist/buckets.h"
#include "common/ops/element_range.h"

namespace lab::ch07 {

struct ShardedBucket {
  dist::GradientBucket bucket;  // its range of the flat buffer and its parameters
  int64_t block = 0;            // elements per rank's block: the bucket padded to a multiple of the ranks
  int64_t row = 1;              // elements the block is a whole number of (the tied embedding's: C; else 1)
  ElementRange owned;           // this rank's block, clipped to the bucket (possibly empty)
  int64_t shard_offset = 0;     // where `owned` starts in this rank's shard (moments, gradient shard)
};

// The transformer block a parameter belongs to: <i> of "h.<i>.", -1 for the others.
int block_of(const ParamInfo& p);
// GPT-2's token or position embedding (wte, wpe), whose gradients come last in backward, from the lookup.
bool is_embedding(const ParamInfo& p);

class ZeroShards {
 public:
  // The shards of `params` over `ranks` ranks, seen from `rank`, with buckets of at most `bucket_bytes`.
  ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes);
  // The shards of ZeRO stage 3, whose buckets are the units it gathers: one per transformer block (`h.<i>.`),
  // and one per other parameter (GPT-2's ln_f weight and bias, wpe, wte). bucket_bytes() is 0.
  static ZeroShards per_block(const ParameterStore& params, int ranks, int rank);

  const std::vector<ShardedBucket>& buckets() const { return buckets_; }
  // This rank's owned ranges, in buffer order (empty ones left out): what AdamW keeps moments for.
  std::vector<ElementRange> owned() const;
  int64_t shard_numel() const { return shard_numel_; }  // the elements of owned(), together
  int64_t bucket_bytes() const { return bucket_bytes_; }
  int ranks() const { return ranks_; }
  int rank() const { return rank_; }

 private:
  ZeroShards(const ParameterStore& params, int ranks, int rank, int64_t bucket_bytes,
             std::vector<dist::GradientBucket> buckets);
  static std::vector<dist::GradientBucket> byte_buckets(const ParameterStore& params, int64_t bucket_bytes);

  int ranks_, rank_;
  int64_t bucket_bytes_;
  std::vector<ShardedBucket> buckets_;
  int64_t shard_numel_ = 0;
};

}  // namespace lab::ch07
