// ZeRO stage 3: parameters gathered per block around its forward and its backward (see stage3_parameters.h).
#include "ch07_memory/zero/stage3_parameters.h"

#include "common/core/error.h"
#include "common/core/memory.h"

namespace lab::ch07 {

namespace {

// The block of a unit (its first parameter's), -1 for the root's.
int block_of_unit(const ParameterStore& params, const ShardedBucket& b) {
  return block_of(params.infos()[b.bucket.params.front()]);
}

}  // namespace

ZeroStage3Step::ZeroStage3Step(comm::Communicator& group, const ZeroShards& shards, GPT2& model, AdamW& optimizer,
                               TrainStepConfig config, bool prefetch)
    : ZeroStage2Step(group, shards, model, optimizer, config) {
  LAB_CHECK(shards.bucket_bytes() == 0, InvalidArgument,
            "ZeRO stage 3 gathers whole blocks: its shards are ZeroShards::per_block's, not buckets of bytes");
  LAB_CHECK(model.matmul_dtype() == DType::F32, InvalidArgument,
            "ZeRO stage 3 shards the fp32 weights only, not mixed precision's 16-bit copy: train in fp32 or tf32");
  ParameterStore& params = model.parameters();
  const Tensor& flat = params.params();
  LAB_CHECK(flat.defined(), InvalidArgument, "ZeRO stage 3: the model's parameters are sharded already");
  {
    MemoryScope scope(MemCategory::Params);
    parameter_shard_ = Tensor::empty({shards.shard_numel()}, DType::F32, params.device());
  }
  for (const ShardedBucket& b : shards.buckets()) {
    if (b.owned.size() > 0)
      parameter_shard_.view(b.shard_offset, {b.owned.size()}).copy_from(flat.view(b.owned.begin, {b.owned.size()}));
    Unit unit;
    unit.root = block_of_unit(params, b) < 0;
    for (const size_t i : b.bucket.params) unit.vars.push_back(params.var(params.infos()[i].name));
    units_.push_back(std::move(unit));
    if (units_.back().root) {  // kept whole: a copy of it now, which every rank has
      units_.back().whole = padded_unit(units_.size() - 1, MemCategory::Params);
      units_.back()
          .whole.view(0, {b.bucket.range.size()})
          .copy_from(flat.view(b.bucket.range.begin, {b.bucket.range.size()}));
    }
  }
  // Which block runs after which: block i's unit is followed by block i+1's in forward and i-1's in backward.
  std::vector<size_t> unit_of_block(static_cast<size_t>(model.config().n_layer), kNone);
  for (size_t u = 0; u < units_.size(); ++u)
    if (const int i = block_of_unit(params, shards.buckets()[u]); i >= 0) unit_of_block[static_cast<size_t>(i)] = u;
  for (size_t i = 0; i < unit_of_block.size(); ++i) {
    if (unit_of_block[i] == kNone) continue;
    if (i + 1 < unit_of_block.size()) units_[unit_of_block[i]].next_in_forward = unit_of_block[i + 1];
    if (i > 0) units_[unit_of_block[i]].next_in_backward = unit_of_block[i - 1];
  }
  params.release_flat_params();
  bind_root_units();
  if (prefetch) prefetcher_ = std::make_unique<BlockPrefetcher>(group);
  previous_block_ = model.options().block;
  model.options().block = [this](Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
    return gathered_block(tape, block, x, options);
  };
}

ZeroStage3Step::~ZeroStage3Step() {
  model().options().block = previous_block_;
}

void ZeroStage3Step::bind_root_units() {
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].root) bind_unit(u, units_[u].whole);
}

size_t ZeroStage3Step::unit_of(const Block& block) const {
  for (size_t u = 0; u < units_.size(); ++u)
    for (const Var& v : units_[u].vars)
      if (v == block.ln_1.weight) return u;
  fail(ErrorKind::InvalidArgument, "ZeRO stage 3: a block that is not this model's");
}

Tensor ZeroStage3Step::padded_unit(size_t u, MemCategory category) const {
  const ShardedBucket& b = shards().buckets()[u];
  MemoryScope scope(category);
  // Zeros: the last rank's block may reach past the unit into padding, which its shard does not hold.
  return Tensor::zeros({b.block * shards().ranks()}, DType::F32, parameter_shard_.device());
}

void ZeroStage3Step::copy_own_part(size_t u, const Tensor& into) const {
  const ShardedBucket& b = shards().buckets()[u];
  if (b.owned.size() > 0)
    into.view(b.block * shards().rank(), {b.owned.size()})
        .copy_from(parameter_shard_.view(b.shard_offset, {b.owned.size()}));
}

void ZeroStage3Step::all_gather_unit(size_t u, const Tensor& into) {
  copy_own_part(u, into);
  group().all_gather(into);
}

void ZeroStage3Step::bind_unit(size_t u, const Tensor& whole) {
  const ch08::GradientBucket& b = shards().buckets()[u].bucket;
  const ParameterStore& params = model().parameters();
  for (size_t k = 0; k < b.params.size(); ++k) {
    const ParamInfo& p = params.infos()[b.params[k]];
    units_[u].vars[k].bind_value(whole.defined() ? whole.view(p.offset - b.range.begin, p.shape) : Tensor());
  }
}

void ZeroStage3Step::gather(size_t u) {
  Unit& unit = units_[u];
  if (unit.whole.defined()) return;  // a root unit, or gathered already
  if (prefetcher_) unit.whole = prefetcher_->take(u);
  if (!unit.whole.defined()) {
    unit.whole = padded_unit(u, MemCategory::Params);
    all_gather_unit(u, unit.whole);
  }
  bind_unit(u, unit.whole);
}

void ZeroStage3Step::prefetch(size_t u) {
  if (!prefetcher_ || u == kNone || units_[u].whole.defined()) return;
  Tensor buffer = padded_unit(u, MemCategory::Params);
  copy_own_part(u, buffer);
  prefetcher_->start(u, std::move(buffer));
}

void ZeroStage3Step::release(size_t u) {
  Unit& unit = units_[u];
  if (unit.root) return;
  bind_unit(u, Tensor());
  unit.whole = Tensor();
}

Var ZeroStage3Step::gathered_block(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const MemoryOpScope op("zero3 block");
  const size_t u = unit_of(block);
  gather(u);
  prefetch(units_[u].next_in_forward);
  // Recorded before the block's ops, so run after all of them in backward: the weights are released once the
  // block's backward is done (its gradients were reduce-scattered by then, as their hooks ran).
  if (tape.recording()) tape.record("zero3 release", std::vector<Tensor>{}, [this, u] { release(u); });
  ModelOptions inner = options;
  inner.block = previous_block_;
  const Var y = previous_block_ ? previous_block_(tape, block, x, inner) : block_forward(tape, block, x, inner);
  // Recorded after them, so run first: the weights gathered again just before the block's backward.
  if (tape.recording())
    tape.record("zero3 gather", std::vector<Tensor>{}, [this, u] {
      gather(u);
      prefetch(units_[u].next_in_backward);
    });
  release(u);
  return y;
}

void ZeroStage3Step::optimizer_step(double lr, float clip_coefficient) {
  if (prefetcher_) prefetcher_->drop();  // a gather of the weights before this update would be stale
  optimizer().step(static_cast<float>(lr), clip_coefficient, gradient_shard(), parameter_shard_);
  for (size_t u = 0; u < units_.size(); ++u)                  // the root units, whole again from the updated shards
    if (units_[u].root) all_gather_unit(u, units_[u].whole);  // bound to it already
}

void ZeroStage3Step::with_whole_model(const std::function<void()>& use) {
  if (prefetcher_) prefetcher_->drop();
  ParameterStore& params = model().parameters();
  Tensor flat;
  {
    MemoryScope scope(MemCategory::Params);
    flat = Tensor::zeros({params.numel()}, DType::F32, params.device());
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    const ShardedBucket& b = shards().buckets()[u];
    const Tensor padded = padded_unit(u, MemCategory::Comm);
    all_gather_unit(u, padded);
    flat.view(b.bucket.range.begin, {b.bucket.range.size()}).copy_from(padded.view(0, {b.bucket.range.size()}));
  }
  params.restore_flat_params(flat);
  flat = Tensor();
  const auto shard_again = [&] {
    params.release_flat_params();
    bind_root_units();
  };
  try {
    use();
  } catch (...) {
    shard_again();
    throw;
  }
  shard_again();
}

}  // namespace lab::ch07
