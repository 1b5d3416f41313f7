// The tensor-parallel functions (see functions.h).
#include "ch08_distributed/tp/functions.h"

#include "ch08_distributed/tp/vocab_parallel_ops.h"
#include "common/autograd/function_support.h"
#include "common/ops/embedding.h"
#include "common/ops/residual.h"

namespace lab::ch08::tp {

namespace {

using ag::new_activation;

bool requires_grad(const Var& v) {
  return v.defined() && v.requires_grad();
}

// grad += g, into a Var's gradient.
void accumulate(const Var& v, const Tensor& g) {
  ops::residual_backward(v.grad(), Tensor(), g);
}

// g with a bias: the sum over the tp ranks of `partial` [..., K], plus the first `rows` rows of `bias`
// (flattened to K values; rows = all of a linear layer's bias [K], or T rows of wpe [maxT, C] for the
// positions of a [B, T, C] activation). The bias is added once, after the sum; its gradient, the row sum of
// the output's gradient, is the same on every rank, so the replicated bias stays the same everywhere.
Var reduce_and_add_rows(Tape& tape, const Var& partial, const Var& bias, int64_t rows, comm::Communicator& tp_group) {
  Var y(new_activation(partial.value().shape(), partial.value()),
        tape.recording() && (requires_grad(partial) || requires_grad(bias)));
  tp_group.all_reduce(partial.value(), y.value(), comm::ReduceOp::Sum);
  if (bias.defined()) add_bias(y.value(), bias.value().slice_rows(0, rows).flatten());
  if (y.requires_grad())
    tape.record(
        [bias, rows, partial = partial.without_value(), y = y.without_value()] {
          if (requires_grad(bias)) add_bias_grad(bias.grad().slice_rows(0, rows).flatten(), y.grad());
          if (requires_grad(partial)) accumulate(partial, y.grad());
        },
        {partial, bias});
  return y;
}

}  // namespace

Var copy_to_tp_ranks(Tape& tape, const Var& x, comm::Communicator& tp_group) {
  // The value is shared, not copied: nothing writes over an activation once it is computed.
  Var y(x.value(), tape.recording() && x.requires_grad());
  if (y.requires_grad())
    tape.record(
        [x = x.without_value(), y = y.without_value(), &tp_group] {
          tp_group.all_reduce(y.grad(), comm::ReduceOp::Sum);
          accumulate(x, y.grad());
        },
        {x});
  return y;
}

Var reduce_from_tp_ranks(Tape& tape, const Var& partial, const Var& bias, comm::Communicator& tp_group) {
  return reduce_and_add_rows(tape, partial, bias, bias.defined() ? bias.value().dim(0) : 0, tp_group);
}

Var vocab_parallel_embedding(Tape& tape, const Tensor& tokens, const Var& wte_slice, const Var& wpe,
                             int64_t vocab_start, int64_t vocab_rows, comm::Communicator& tp_group) {
  tokens.check_ndim(2, "embedding tokens");
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte_slice.value().dim(1);
  LAB_CHECK(T <= wpe.value().dim(0), InvalidArgument, "embedding: sequence length ", T, " exceeds the ",
            wpe.value().dim(0), " positions of wpe");
  Var looked_up(new_activation({B, T, C}, wte_slice.value()), tape.recording() && wte_slice.requires_grad());
  vocab_slice_embedding_forward(looked_up.value(), tokens, wte_slice.value(), vocab_start, vocab_rows);
  if (looked_up.requires_grad())
    tape.record(
        [wte_slice, tokens, vocab_start, looked_up = looked_up.without_value()] {
          ops::embedding_backward_rows(wte_slice.grad(), Tensor(), looked_up.grad(), tokens, vocab_start);
        },
        {wte_slice});
  // The positions are a bias over the flattened [T, C] of each sequence: g(E_r[tokens]) + wpe[:T].
  return reduce_and_add_rows(tape, looked_up, wpe, T, tp_group);
}

Tensor vocab_parallel_cross_entropy(Tape& tape, const Var& logits_slice, const Tensor& targets, int64_t vocab_start,
                                    int64_t vocab, const ops::GradScale& grad_scale, comm::Communicator& tp_group) {
  const Tensor& lv = logits_slice.value();
  const int64_t S = lv.dim(-1), N = lv.numel() / S;
  const Tensor logits = lv.reshape({N, S});
  const Tensor rows = targets.reshape({N});
  const Tensor row_max = new_activation({N}, lv);
  // The sums of exponentials and the target logits, side by side so that one all-reduce sums both.
  const Tensor sums = new_activation({2, N}, lv);
  const Tensor sum_exp = sums.slice_rows(0, 1).reshape({N});
  const Tensor target_logit = sums.slice_rows(1, 2).reshape({N});

  vocab_slice_max_and_target(logits, rows, vocab_start, vocab, row_max, target_logit);
  tp_group.all_reduce(row_max, comm::ReduceOp::Max);
  vocab_slice_sum_exp(logits, row_max, vocab_start, vocab, sum_exp);
  tp_group.all_reduce(sums, comm::ReduceOp::Sum);

  const bool with_grad = tape.recording() && logits_slice.requires_grad();
  const ops::GradScale dloss = ag::mean_loss_gradient(with_grad, grad_scale, N, "cross_entropy");
  const Tensor losses = new_activation({N}, lv);
  vocab_slice_loss_and_grad(logits, losses, rows, row_max, sum_exp, target_logit, vocab_start, vocab, dloss);
  if (with_grad) ag::bind_logits_as_gradient(tape, logits_slice, lv);  // the buffer now holds this rank's dlogits
  return losses;
}

}  // namespace lab::ch08::tp
