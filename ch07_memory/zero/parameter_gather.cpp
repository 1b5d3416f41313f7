// The parameter all-gather after a sharded update, and the moments gathered for checkpoints (see
// parameter_gather.h).
#include "ch07_memory/zero/parameter_gather.h"

#include "ch07_memory/zero/stream_copy.h"
#include "common/core/memory.h"

namespace lab::ch07 {

void all_gather_parameters(comm::Communicator& group, const ZeroShards& shards, const ParameterStore& params) {
  const Tensor& flat = params.params();
  for (const ShardedBucket& b : shards.buckets()) {
    // Rank r's block is block r of the padded bucket; all_gather fills the others in place. A bucket that needs
    // no padding (its size a multiple of the ranks: always when they divide 32, the parameters' alignment) is
    // gathered where it lies, with no staging buffer.
    const ElementRange& r = b.bucket.range;
    if (r.size() == b.block * shards.ranks()) {
      group.all_gather(flat.view(r.begin, {r.size()}));
      continue;
    }
    Tensor padded;
    {
      MemoryScope scope(MemCategory::Comm);
      padded = Tensor::empty({b.block * shards.ranks()}, DType::F32, flat.device());
    }
    if (b.owned.size() > 0)
      copy_on_stream(padded.view(b.block * shards.rank(), {b.owned.size()}),
                     flat.view(b.owned.begin, {b.owned.size()}));
    group.all_gather(padded);
    copy_on_stream(flat.view(r.begin, {r.size()}), padded.view(0, {r.size()}));
  }
}

std::unique_ptr<AdamW> gather_whole_optimizer(comm::Communicator& group, const AdamW& sharded, ParameterStore& params) {
  auto whole = std::make_unique<AdamW>(params, sharded.config());
  whole->set_steps_taken(sharded.steps_taken());
  // Each rank writes its owned ranges into zeroed whole buffers; the ranks' ranges are disjoint, so a sum over
  // the group puts every element in place, exactly.
  for (const auto& [full, shard] : {std::pair{&whole->m(), &sharded.m()}, std::pair{&whole->v(), &sharded.v()}}) {
    int64_t offset = 0;
    for (const ElementRange& r : sharded.owned()) {
      full->view(r.begin, {r.size()}).copy_from(shard->view(offset, {r.size()}));
      offset += r.size();
    }
    group.all_reduce(*full, comm::ReduceOp::Sum);
  }
  return whole;
}

void load_optimizer_shard(const AdamW& whole, AdamW& sharded) {
  for (const auto& [full, shard] : {std::pair{&whole.m(), &sharded.m()}, std::pair{&whole.v(), &sharded.v()}}) {
    int64_t offset = 0;
    for (const ElementRange& r : sharded.owned()) {
      shard->view(offset, {r.size()}).copy_from(full->view(r.begin, {r.size()}));
      offset += r.size();
    }
  }
  sharded.set_steps_taken(whole.steps_taken());
}

}  // namespace lab::ch07
