// ZeRO stage 2: gradients reduce-scattered bucket by bucket from gradient hooks (see stage2_gradients.h).
#include "ch07_memory/zero/stage2_gradients.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ch07_memory/zero/parameter_gather.h"
#include "ch07_memory/zero/stream_copy.h"
#include "ch07_memory/zero/zero_step.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/ops/reduce.h"
#include "common/ops/residual.h"

namespace lab::ch07 {

namespace {

// The tied embedding's chunks are buckets: at most bucket_bytes, or under stage 3 (whose buckets are units) the
// largest block.
int64_t chunk_elements(const ZeroShards& shards, const ParameterStore& params) {
  if (shards.bucket_bytes() > 0) return shards.bucket_bytes() / static_cast<int64_t>(sizeof(float));
  int64_t largest = 0;
  for (const ShardedBucket& b : shards.buckets())
    if (block_of(params.infos()[b.bucket.params.front()]) >= 0) largest = std::max(largest, b.bucket.range.size());
  return largest;
}

}  // namespace

ZeroStage2Step::ZeroStage2Step(comm::Communicator& group, const ZeroShards& shards, GPT2& model, AdamW& optimizer,
                               TrainStepConfig config)
    : TrainStep(model, optimizer, config), group_(group), shards_(shards) {
  check_sharding(group, shards, optimizer);
  ParameterStore& params = model.parameters();
  {
    MemoryScope scope(MemCategory::Grads);
    gradient_shard_ = Tensor::zeros({shards_.shard_numel()}, DType::F32, params.device());
  }
  params.release_flat_grads();
  bucket_of_.resize(params.infos().size());
  for (size_t b = 0; b < shards_.buckets().size(); ++b)
    for (const size_t p : shards_.buckets()[b].bucket.params) bucket_of_[p] = b;
  pending_.resize(shards_.buckets().size());
  reduced_.resize(shards_.buckets().size());
  for (size_t i = 0; i < params.infos().size(); ++i) {
    params.var(params.infos()[i].name).set_gradient_hook([this, i] { on_gradient_final(i); });
    if (params.infos()[i].name == "wte.weight") tied_bucket_ = bucket_of_[i];
  }
  if (tied_bucket_ != kNone && !model.options().tensor_parallel) {
    const ShardedBucket& tied = shards_.buckets()[tied_bucket_];
    const ParamInfo& wte = params.info("wte.weight");
    tied_ = std::make_unique<TiedEmbeddingGradient>(
        wte.shape[0], wte.shape[1], shards_.ranks(), tied.block / tied.row, chunk_elements(shards_, params),
        [this](int64_t first_row, int64_t rows, const Tensor& pack) { reduce_tied_chunk(first_row, rows, pack); });
    previous_embedding_ = model.options().embedding;
    previous_lm_head_ = model.options().lm_head;
    model.options().embedding = [this](Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe) {
      return tied_->embedding(tape, tokens, wte, wpe);
    };
    model.options().lm_head = [this](Tape& tape, const Var& x, const Var& wte) { return tied_->lm_head(tape, x, wte); };
  }
}

ZeroStage2Step::~ZeroStage2Step() {
  if (tied_) {
    model().options().embedding = previous_embedding_;
    model().options().lm_head = previous_lm_head_;
  }
  const ParameterStore& params = model().parameters();
  for (const ParamInfo& p : params.infos()) params.var(p.name).set_gradient_hook({});
}

void ZeroStage2Step::zero_grads() {
  TrainStep::zero_grads();  // releases any per-parameter gradient left over
  gradient_shard_.zero_();
}

void ZeroStage2Step::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  micro_batch_ = 0;
  TrainStep::run_micro_batches(next_batch, result);
  group_.all_reduce(loss_sum(), comm::ReduceOp::Avg);  // the global batch's loss, on the device
}

void ZeroStage2Step::forward_backward(const MicroBatch& batch, TrainStepResult& result) {
  for (size_t b = 0; b < pending_.size(); ++b) {
    pending_[b] = shards_.buckets()[b].bucket.params.size();
    reduced_[b] = tied_ && b == tied_bucket_;  // reduced chunk by chunk as backward makes it
  }
  TrainStep::forward_backward(batch, result);
  ++micro_batch_;
  // A bucket whose hooks did not all run (a parameter that received no gradient) is reduced now, in bucket
  // order on every rank, so that the ranks' collectives stay in the same order.
  for (size_t b = 0; b < reduced_.size(); ++b)
    if (!reduced_[b]) reduce_bucket(b);
}

void ZeroStage2Step::on_gradient_final(size_t param) {
  const size_t b = bucket_of_[param];
  if (--pending_[b] == 0) reduce_bucket(b);
}

void ZeroStage2Step::reduce_tied_chunk(int64_t first_row, int64_t rows, const Tensor& pack) {
  const ShardedBucket& b = shards_.buckets()[tied_bucket_];
  Tensor part;
  {
    MemoryScope scope(MemCategory::Comm);
    part = Tensor::empty({rows * b.row}, DType::F32, pack.device());
  }
  group_.reduce_scatter(pack.flatten(), part, comm::ReduceOp::Avg);
  // This rank's rows [first_row, first_row + rows) of its block, of which those before b.owned's end are real.
  const int64_t begin = first_row * b.row, real = std::min(b.owned.size() - begin, rows * b.row);
  if (real > 0)
    ops::residual_backward(gradient_shard_.view(b.shard_offset + begin, {real}), Tensor(), part.view(0, {real}));
}

void ZeroStage2Step::reduce_bucket(size_t index) {
  const ShardedBucket& b = shards_.buckets()[index];
  const ParameterStore& params = model().parameters();
  const int64_t padded = b.block * shards_.ranks();
  // The reduce-scatter's input: the bucket's gradients packed into one padded buffer, or, for a bucket of one
  // parameter that needs no padding (GPT-2's tied embedding), that gradient where it lies.
  const ParamInfo& first = params.infos()[b.bucket.params.front()];
  Tensor input;
  if (b.bucket.params.size() == 1 && first.numel() == padded) {
    input = params.var(first.name).grad().view(0, {padded});
  } else {
    {
      MemoryScope scope(MemCategory::Comm);
      input = Tensor::zeros({padded}, DType::F32, params.device());
    }
    for (const size_t i : b.bucket.params) {
      const ParamInfo& p = params.infos()[i];
      copy_on_stream(input.view(p.offset - b.bucket.range.begin, {p.numel()}), params.var(p.name).grad());
    }
  }
  // Its output: this rank's block, straight into the gradient shard for the step's first micro-batch when the
  // block has no padding (the shard is zero then), else beside it, to be added.
  const bool into_shard = micro_batch_ == 0 && b.owned.size() == b.block;
  Tensor block;
  if (into_shard) {
    block = gradient_shard_.view(b.shard_offset, {b.block});
  } else {
    MemoryScope scope(MemCategory::Comm);
    block = Tensor::empty({b.block}, DType::F32, params.device());
  }
  group_.reduce_scatter(input, block, comm::ReduceOp::Avg);
  input = Tensor();
  for (const size_t i : b.bucket.params) params.var(params.infos()[i].name).bind_grad(Tensor());  // freed
  if (!into_shard && b.owned.size() > 0)  // the shard += this micro-batch's averaged block
    ops::residual_backward(gradient_shard_.view(b.shard_offset, {b.owned.size()}), Tensor(),
                           block.view(0, {b.owned.size()}));
  reduced_[index] = true;
}

std::string ZeroStage2Step::capture_blocker() const {
  if (std::string why = TrainStep::capture_blocker(); !why.empty()) return why;
  return group_.capture_blocker("ZeRO's reduce-scatters and all-gathers");
}

void ZeroStage2Step::prepare_capture() {
  group_.queue_where_able();
}

void ZeroStage2Step::before_read_back() {
  group_.wait_queued();
}

void ZeroStage2Step::compute_gradient_norm() {
  // Each rank's shard's sum of squares, added over the ranks on the device: nothing is read back.
  const Tensor sum_squares = Tensor::zeros({1}, DType::F32, model().device());
  ops::accumulate_sum_squares(sum_squares, gradient_shard_);
  group_.all_reduce(sum_squares, comm::ReduceOp::Sum);
  write_gradient_norm(sum_squares);
}

void ZeroStage2Step::optimizer_step(double lr) {
  optimizer().step(static_cast<float>(lr), grad_scale(), gradient_shard_);
  all_gather_parameters(group_, shards_, model().parameters());
}

}  // namespace lab::ch07
