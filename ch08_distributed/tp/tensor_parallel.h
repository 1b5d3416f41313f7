// Tensor parallelism for the core's GPT-2: the TensorParallelFunctions it calls (common/nn/tensor_parallel.h)
// implemented over the tp group's Communicator with Megatron's functions (functions.h), and the model one
// rank of a dp x tp x pp layout builds.
//
//   comm::ParallelContext context(world, {.dp = 1, .tp = 2, .pp = 1});
//   std::unique_ptr<GPT2> model = ch08::tp::model_for_rank(context, config, Device::cpu());
//   model->init_weights(seed);  // this rank's slice of the very weights one process would draw
//
// The model's forward and backward then communicate inside the tp group by themselves; what is left to the
// step is the gradient norm (replicated parameters counted once, ch08_distributed/tp/gradient_norm.h).
#pragma once

#include <memory>

#include "common/comm/communicator.h"
#include "common/comm/parallel_context.h"
#include "common/nn/gpt2.h"
#include "common/nn/tensor_parallel.h"
#include "common/ops/grad_scale.h"

namespace lab::ch08::tp {

class TensorParallelGroup final : public TensorParallelFunctions {
 public:
  // `tp_group` must outlive this object (and the models using it).
  explicit TensorParallelGroup(comm::Communicator& tp_group) : tp_group_(tp_group) {}

  int tp_size() const override { return tp_group_.size(); }
  int tp_rank() const override { return tp_group_.rank(); }
  Var copy_to_tp_ranks(Tape& tape, const Var& x) const override;
  Var reduce_from_tp_ranks(Tape& tape, const Var& partial, const Var& bias) const override;
  Var vocab_parallel_embedding(Tape& tape, const Tensor& tokens, const Var& wte_slice, const Var& wpe,
                               int64_t vocab_start) const override;
  Tensor vocab_parallel_cross_entropy(Tape& tape, const Var& logits_slice, const Tensor& targets, int64_t vocab_start,
                                      int64_t vocab, const ops::GradScale& grad_scale) const override;

 private:
  comm::Communicator& tp_group_;
};

// The shard of GPT-2 this rank of `context` holds: its tp slice of the blocks of its pipeline stage.
ModelShard model_shard_for(const comm::ParallelContext& context, const GPT2Config& config);

// This rank's model: the shard above, with the tensor-parallel functions over context.tp() added to `options`
// when tp > 1 (a single rank gets the whole model, unchanged). `context` must outlive the model.
std::unique_ptr<GPT2> model_for_rank(const comm::ParallelContext& context, const GPT2Config& config, Device device,
                                     ModelOptions options = {});

}  // namespace lab::ch08::tp
