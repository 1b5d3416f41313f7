#include "common/nn/modules.h"

#include "common/nn/low_precision_linear.h"

namespace lab {

Var Linear::forward(Tape& tape, const Var& x) const {
  if (weight_16bit.defined()) return low_precision_linear(tape, x, weight, weight_16bit, bias, bias_16bit);
  return ag::linear(tape, x, weight, bias);
}

namespace {

// The input of a column-parallel layer: f(x) on a tensor-parallel shard, x itself otherwise.
Var column_parallel_input(Tape& tape, const Var& x, const ModelOptions& options) {
  return options.tensor_parallel ? options.tensor_parallel->copy_to_tp_ranks(tape, x) : x;
}

// A row-parallel layer: this rank's partial product, summed across the ranks, then the bias (once).
Var row_parallel_linear(Tape& tape, const Linear& linear, const Var& x, const ModelOptions& options) {
  if (!options.tensor_parallel) return linear.forward(tape, x);
  const Linear without_bias{linear.weight, Var(), linear.weight_16bit, Tensor()};
  return options.tensor_parallel->reduce_from_tp_ranks(tape, without_bias.forward(tape, x), linear.bias);
}

}  // namespace

Var mlp_forward(Tape& tape, const MLP& mlp, const Var& x, const ModelOptions& options) {
  const Var hidden = ag::gelu(tape, mlp.c_fc.forward(tape, column_parallel_input(tape, x, options)));
  return row_parallel_linear(tape, mlp.c_proj, hidden, options);
}

Var attention_forward(Tape& tape, const CausalSelfAttention& attn, const Var& x, const ModelOptions& options) {
  const Var qkv = attn.c_attn.forward(tape, column_parallel_input(tape, x, options));
  return row_parallel_linear(tape, attn.c_proj, options.attention(tape, qkv, attn.n_head), options);
}

Var block_forward(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var h = ag::residual(tape, x, attention_forward(tape, block.attn, block.ln_1.forward(tape, x), options));
  const Var m = block.ln_2.forward(tape, h);
  return ag::residual(tape, h,
                      options.mlp ? options.mlp(tape, block.mlp, m) : mlp_forward(tape, block.mlp, m, options));
}

}  // namespace lab
