#include "common/nn/modules.h"

#include "common/autograd/function_support.h"
#include "common/nn/low_precision_linear.h"
#include "common/ops/gelu.h"
#include "common/ops/linear.h"

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
  const Var pre = mlp.c_fc.forward(tape, column_parallel_input(tape, x, options));
  if (options.recompute_gelu) {
    LAB_CHECK(!options.tensor_parallel, InvalidArgument,
              "recomputing the GELU (--recompute selective) replaces the MLP's second half, which a tensor-parallel "
              "shard cannot do (use --recompute block with --tp)");
    return gelu_linear_recomputing_gelu(tape, pre, mlp.c_proj);
  }
  return row_parallel_linear(tape, mlp.c_proj, ag::gelu(tape, pre), options);
}

Var gelu_linear_recomputing_gelu(Tape& tape, const Var& pre, const Linear& linear) {
  const MemoryOpScope op("gelu+linear");
  const Tensor& h = pre.value();
  const Var w = linear.weight, b = linear.bias;
  const Tensor weight = linear.matmul_weight();
  const DType operands = weight.dtype();
  Shape shape = h.shape();
  shape.back() = weight.dim(0);
  Var out(ag::new_activation(shape, h), tape.recording() && ag::any_requires_grad({&pre, &w, &b}));
  const Tensor bias = bias_for_output(b, linear.bias_16bit, h.dtype());
  {
    const Tensor gelu_out = ag::new_activation(h.shape(), h);  // freed at the end of this scope
    ops::gelu_forward(gelu_out, h);
    ops::linear_forward(out.value(), matmul_operand(gelu_out, operands), weight, bias);
  }
  if (out.requires_grad())
    tape.record("gelu+linear (gelu recomputed)", {h},
                [pre, h, w, b, weight, operands, out = out.without_value()] {
                  Tensor gelu_out = ag::new_activation(h.shape(), h);
                  ops::gelu_forward(gelu_out, h);
                  // The GELU output's gradient: this product is its only contribution, written over a new buffer.
                  const Tensor dgelu = pre.requires_grad() ? ag::new_activation(h.shape(), h) : Tensor();
                  const ag::ParameterGradients dp = ag::parameter_gradients(w, b);
                  ops::linear_backward(dgelu, dp.weight, dp.bias, out.grad(), matmul_operand(gelu_out, operands),
                                       weight, ops::GradWrite::Overwrite, dp.write);
                  gelu_out = Tensor();  // GELU's backward reads its input, not its output
                  if (const ag::GradientTarget dpre = ag::gradient_target(pre); dpre.grad.defined())
                    ops::gelu_backward(dpre.grad, h, dgelu, dpre.write);
                },
                {pre, w, b});
  return out;
}

Var attention_qkv(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var normalized = block.ln_1.forward(tape, x);
  const Var qkv = block.attn.c_attn.forward(tape, column_parallel_input(tape, normalized, options));
  if (options.recompute_layernorm)
    ag::recompute_layernorm_in_backward(tape, normalized, x, block.ln_1.weight, block.ln_1.bias);
  return qkv;
}

Var attention_from_qkv(Tape& tape, const CausalSelfAttention& attn, const Var& qkv, const ModelOptions& options) {
  return row_parallel_linear(tape, attn.c_proj, options.attention(tape, qkv, attn.n_head), options);
}

Var block_forward(Tape& tape, const Block& block, const Var& x, const ModelOptions& options) {
  const Var h = ag::residual_into_stream(
      tape, x, attention_from_qkv(tape, block.attn, attention_qkv(tape, block, x, options), options));
  const Var m = block.ln_2.forward(tape, h);
  const Var out = options.mlp ? options.mlp(tape, block.mlp, m, options) : mlp_forward(tape, block.mlp, m, options);
  // The MLP's only reader of m is its first layer; its backward is the MLP's last, so m comes back just before
  // the MLP's backward starts.
  if (options.recompute_layernorm) ag::recompute_layernorm_in_backward(tape, m, h, block.ln_2.weight, block.ln_2.bias);
  return ag::residual_into_stream(tape, h, out);
}

}  // namespace lab
