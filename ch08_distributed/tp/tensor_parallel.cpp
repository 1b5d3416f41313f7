// TensorParallelGroup and the model of a rank (see tensor_parallel.h).
#include "ch08_distributed/tp/tensor_parallel.h"

#include "ch08_distributed/tp/functions.h"

namespace lab::ch08::tp {

Var TensorParallelGroup::copy_to_tp_ranks(Tape& tape, const Var& x) const {
  return tp::copy_to_tp_ranks(tape, x, tp_group_);
}

Var TensorParallelGroup::reduce_from_tp_ranks(Tape& tape, const Var& partial, const Var& bias) const {
  return tp::reduce_from_tp_ranks(tape, partial, bias, tp_group_);
}

Var TensorParallelGroup::vocab_parallel_embedding(Tape& tape, const Tensor& tokens, const Var& wte_slice,
                                                  const Var& wpe, int64_t vocab_start) const {
  // Every rank holds an equal slice, so the whole table has tp_size() slices' rows.
  const int64_t vocab_rows = wte_slice.value().dim(0) * tp_size();
  return tp::vocab_parallel_embedding(tape, tokens, wte_slice, wpe, vocab_start, vocab_rows, tp_group_);
}

Tensor TensorParallelGroup::vocab_parallel_cross_entropy(Tape& tape, const Var& logits_slice, const Tensor& targets,
                                                         int64_t vocab_start, int64_t vocab,
                                                         const ops::GradScale& grad_scale) const {
  return tp::vocab_parallel_cross_entropy(tape, logits_slice, targets, vocab_start, vocab, grad_scale, tp_group_);
}

ModelShard model_shard_for(const comm::ParallelContext& context, const GPT2Config& config) {
  const comm::ParallelLayout& layout = context.layout();
  return ModelShard::of_rank(config, context.coords().tp, layout.tp, context.coords().pp, layout.pp);
}

std::unique_ptr<GPT2> model_for_rank(const comm::ParallelContext& context, const GPT2Config& config, Device device,
                                     ModelOptions options) {
  if (context.layout().tp > 1) options.tensor_parallel = std::make_shared<TensorParallelGroup>(context.tp());
  return std::make_unique<GPT2>(config, device, std::move(options), model_shard_for(context, config));
}

}  // namespace lab::ch08::tp
