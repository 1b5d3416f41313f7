// ZeRO stage 2 (`--zero 2`): the gradients are sharded too.
//
// What changes from stage 1 (stage1_optimizer_state.h): the gradients are reduce-scattered instead of
// all-reduced, and no rank keeps the whole gradient. The model's flat gradient buffer is released
// (ParameterStore::release_flat_grads): backward allocates each parameter's gradient when it first adds to it,
// and a gradient hook (common/autograd/var.h) counts down the parameter's bucket (shards.h). When a bucket's
// last gradient is final, its gradients are packed into one padded buffer (a bucket of one parameter needing no
// padding is sent as it lies), reduce-scattered (averaged) so that this rank receives its block, added into the
// rank's gradient shard (or written there, for the step's first micro-batch), and freed; backward goes on. After
// backward every rank holds the averaged gradient of its shard only: the gradient norm is the square root of
// the sum over the ranks of their shards' sums of squares, and AdamW updates the shard from it; the parameters
// are then all-gathered as in stage 1.
//
// GPT-2's tied token embedding, the largest parameter, is used twice: the LM head's backward makes the first
// contribution to its gradient, the lookup's the last. Neither is made whole: the model's LM head and lookup
// are replaced by functions that make wte's gradient in chunks of a bucket's size, each reduce-scattered into
// the rank's shard as soon as it is made (tied_embedding_gradient.h; the embeddings are buckets of their own,
// wte's cut in whole rows: shards.h). Under mixed precision the model keeps its 16-bit LM head: that
// contribution is made whole, and wte's gradient hook reduces it and frees it as soon as the head's backward
// has made it.
//
// With gradient accumulation each micro-batch's backward reduce-scatters its buckets and adds them to the
// shard, so no full gradient outlives a backward pass (DeepSpeed's stage 2 does the same); the sum of the
// micro-batches' averages is the average of their sums, up to the order of floating-point additions.
//
// Per-rank bytes with fp32 AdamW: 4Ψ parameters + 4Ψ/D gradients + 8Ψ/D moments, plus the gradients in flight:
// the bucket being filled (or a chunk of wte's). What it costs: a reduce-scatter per bucket per micro-batch
// (wte's twice, chunk by chunk), on the backward thread (this step does not overlap it with backward), and a
// scalar all-reduce for the norm. Each of wte's two contributions is reduced on its own: their sum is the
// same up to the order of floating-point additions, so the losses equal data parallelism's within rounding,
// no longer to the bit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ch07_memory/zero/shards.h"
#include "ch07_memory/zero/tied_embedding_gradient.h"
#include "common/comm/communicator.h"
#include "common/train/train_step.h"

namespace lab::ch07 {

class ZeroStage2Step : public TrainStep {
 public:
  // `optimizer` must be sharded as `shards` says, `group` the shards' ranks. Releases the model's flat
  // gradient buffer for good, sets a gradient hook on every parameter and puts the chunked LM head and lookup of
  // the tied embedding (tied_embedding_gradient.h) in the model's options.
  ZeroStage2Step(comm::Communicator& group, const ZeroShards& shards, GPT2& model, AdamW& optimizer,
                 TrainStepConfig config);
  ~ZeroStage2Step() override;  // removes the hooks, puts the previous head and lookup back

  // This rank's averaged gradients of its shard after a step, laid out as the optimizer's moments.
  const Tensor& gradient_shard() const { return gradient_shard_; }
  // Captured in a CUDA graph where the group's collectives can be queued on the stream (NCCL): the buckets'
  // packing (copies queued on the stream), reduce-scatters and accumulation into the shard, the norm's sum and
  // the parameters' all-gather go into the graph with the kernels.
  std::string capture_blocker() const override;
  void prepare_capture() override;

 protected:
  void before_read_back() override;
  static constexpr size_t kNone = static_cast<size_t>(-1);  // no bucket, no unit

  comm::Communicator& group() const { return group_; }
  const ZeroShards& shards() const { return shards_; }

  void zero_grads() override;
  void run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) override;
  void forward_backward(const MicroBatch& batch, TrainStepResult& result) override;
  void compute_gradient_norm() override;
  void optimizer_step(double lr) override;

 private:
  void on_gradient_final(size_t param);
  // Reduce-scatters bucket `index` into the gradient shard and frees its parameters' gradients.
  void reduce_bucket(size_t index);
  // Reduce-scatters a chunk of the tied embedding's gradient and adds this rank's rows into its shard.
  void reduce_tied_chunk(int64_t first_row, int64_t rows, const Tensor& pack);

  comm::Communicator& group_;
  ZeroShards shards_;
  Tensor gradient_shard_;
  std::vector<size_t> bucket_of_;                // per parameter (index into infos())
  std::vector<size_t> pending_;                  // per bucket: its parameters whose gradient is not final yet
  std::vector<bool> reduced_;                    // per bucket, in this micro-batch
  int64_t micro_batch_ = 0;                      // the step's micro-batches whose backward has finished
  size_t tied_bucket_ = kNone;                   // the tied token embedding's bucket (kNone: the model has none)
  std::unique_ptr<TiedEmbeddingGradient> tied_;  // its gradient in chunks (kNone, or tensor parallelism: none)
  ModelOptions::EmbeddingFn previous_embedding_;
  ModelOptions::LmHeadFn previous_lm_head_;
};

}  // namespace lab::ch07
