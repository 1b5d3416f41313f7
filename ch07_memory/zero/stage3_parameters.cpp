// ZeRO stage 3: parameters gathered per unit around its forward and its backward (see stage3_parameters.h).
#include "ch07_memory/zero/stage3_parameters.h"

#include "ch07_memory/zero/stream_copy.h"
#include "common/core/error.h"
#include "common/core/memory.h"

namespace lab::ch07 {

namespace {

// The block of a unit (its first parameter's), -1 for a root unit.
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
    for (const size_t i : b.bucket.params) unit.vars.push_back(params.var(params.infos()[i].name));
    units_.push_back(std::move(unit));
  }
  // The order of use, for prefetch: forward runs the lookup, blocks 0 .. L-1 and the head; backward the head,
  // blocks L-1 .. 0 and the lookup (which gathers nothing).
  std::vector<size_t> unit_of_block(static_cast<size_t>(model.config().n_layer), kNone);
  for (size_t u = 0; u < units_.size(); ++u)
    if (const int i = block_of_unit(params, shards.buckets()[u]); i >= 0) unit_of_block[static_cast<size_t>(i)] = u;
  for (const char* name : {"wte.weight", "wpe.weight"})
    if (const size_t u = unit_named(name); u != kNone) lookup_.units.push_back(u);
  for (const char* name : {"wte.weight", "ln_f.weight", "ln_f.bias"})  // wte first: the one worth prefetching
    if (const size_t u = unit_named(name); u != kNone) head_.units.push_back(u);
  const size_t head_first = head_.units.empty() ? kNone : head_.units.front();
  lookup_.next_in_forward = unit_of_block.empty() ? head_first : unit_of_block.front();
  head_.next_in_backward = unit_of_block.empty() ? kNone : unit_of_block.back();
  for (size_t i = 0; i < unit_of_block.size(); ++i) {
    if (unit_of_block[i] == kNone) continue;
    units_[unit_of_block[i]].next_in_forward = i + 1 < unit_of_block.size() ? unit_of_block[i + 1] : head_first;
    if (i > 0) units_[unit_of_block[i]].next_in_backward = unit_of_block[i - 1];
  }
  params.release_flat_params();
  if (prefetch) prefetcher_ = std::make_unique<BlockPrefetcher>(group);
  previous_block_ = model.options().block;
  model.options().block = [this](Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
    return gathered_block(tape, block, x, options);
  };
  previous_root_ = model.options().root;
  model.options().root = [this](Tape& tape, ModelOptions::RootPart part, const std::function<Var()>& compute) {
    return gathered_root(tape, part, compute);
  };
}

ZeroStage3Step::~ZeroStage3Step() {
  model().options().block = previous_block_;
  model().options().root = previous_root_;
}

size_t ZeroStage3Step::unit_named(const std::string& name) {
  for (size_t u = 0; u < units_.size(); ++u)
    for (const size_t i : shards().buckets()[u].bucket.params)
      if (model().parameters().infos()[i].name == name) return u;
  return kNone;
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
  if (b.owned.size() > 0)  // on the stream, before the all-gather queued after it (stream_copy.h)
    copy_on_stream(into.view(b.block * shards().rank(), {b.owned.size()}),
                   parameter_shard_.view(b.shard_offset, {b.owned.size()}));
}

void ZeroStage3Step::all_gather_unit(size_t u, const Tensor& into) {
  copy_own_part(u, into);
  group().all_gather(into);
}

void ZeroStage3Step::bind_unit(size_t u, const Tensor& whole) {
  const dist::GradientBucket& b = shards().buckets()[u].bucket;
  const ParameterStore& params = model().parameters();
  for (size_t k = 0; k < b.params.size(); ++k) {
    const ParamInfo& p = params.infos()[b.params[k]];
    units_[u].vars[k].bind_value(whole.defined() ? whole.view(p.offset - b.range.begin, p.shape) : Tensor());
  }
}

void ZeroStage3Step::gather(size_t u) {
  Unit& unit = units_[u];
  if (unit.whole.defined()) return;  // gathered already
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
  bind_unit(u, Tensor());
  units_[u].whole = Tensor();
}

void ZeroStage3Step::bind_lookup_gradients() {
  const ParameterStore& params = model().parameters();
  MemoryScope scope(MemCategory::Grads);
  for (const size_t u : lookup_.units) {
    const std::vector<size_t>& members = shards().buckets()[u].bucket.params;
    for (size_t k = 0; k < members.size(); ++k)
      if (params.infos()[members[k]].name != "wte.weight")  // never whole: reduced in chunks
        units_[u].vars[k].bind_grad(Tensor::zeros(params.infos()[members[k]].shape, DType::F32, params.device()));
  }
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

Var ZeroStage3Step::gathered_root(Tape& tape, ModelOptions::RootPart part, const std::function<Var()>& compute) {
  const MemoryOpScope op("zero3 root");
  const bool lookup = part == ModelOptions::RootPart::Embedding;
  const RootUse& use = lookup ? lookup_ : head_;
  for (const size_t u : use.units) gather(u);
  prefetch(use.next_in_forward);
  // Recorded before the part's ops, so run after their backward: the weights released.
  if (tape.recording())
    tape.record("zero3 release", std::vector<Tensor>{}, [this, &use] {
      for (const size_t u : use.units) release(u);
    });
  const Var y = previous_root_ ? previous_root_(tape, part, compute) : compute();
  // Recorded after them, so run first: the head's weights gathered again for its backward; the lookup's backward
  // reads no weight, and only wpe's gradient needs its shape.
  if (tape.recording())
    tape.record("zero3 gather", std::vector<Tensor>{}, [this, &use, lookup] {
      if (lookup) {
        bind_lookup_gradients();
        return;
      }
      for (const size_t u : use.units) gather(u);
      prefetch(use.next_in_backward);
    });
  for (const size_t u : use.units) release(u);
  return y;
}

std::string ZeroStage3Step::capture_blocker() const {
  if (prefetcher_)
    return "ZeRO stage 3 with --zero-prefetch gathers the next unit from a thread, which a capture cannot follow "
           "(drop --zero-prefetch)";
  return ZeroStage2Step::capture_blocker();
}

void ZeroStage3Step::optimizer_step(double lr) {
  if (prefetcher_) prefetcher_->drop();  // a gather of the weights before this update would be stale
  optimizer().step(static_cast<float>(lr), grad_scale(), gradient_shard(), parameter_shard_);
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
  const auto shard_again = [&] { params.release_flat_params(); };
  try {
    use();
  } catch (...) {
    shard_again();
    throw;
  }
  shard_again();
}

}  // namespace lab::ch07
