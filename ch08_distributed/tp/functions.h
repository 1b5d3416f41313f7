// Megatron-LM's tensor-parallel communication as differentiable functions over the tp group's
// Communicator: each runs its forward (communicating where the math needs it) and records its backward on
// the tape, like the core's functions (common/autograd/functions.h).
//
//   f  copy_to_tp_ranks        y = x                        dx = all_reduce(dy)
//   g  reduce_from_tp_ranks    y = all_reduce(partial) + b  dpartial = dy, db = sum over rows of dy
//
// A column-parallel layer Y_r = f(X) A_r^T needs every rank's input whole, and its input's gradient is the
// sum of each rank's contribution: f. A row-parallel layer Y = sum_r X_r B_r^T is a sum of partial products:
// g, whose backward hands the same dY to every rank. An MLP is g(gelu(f(X) A_r^T) B_r^T) + b: one all-reduce
// forward, one backward.
//
// The vocabulary-parallel embedding and cross-entropy split the vocabulary the same way: the embedding is
// g(E_r[tokens]) + wpe (each rank looks up the tokens of its slice, zeros elsewhere), and the cross-entropy
// combines each rank's maximum, sum of exponentials and target logit with two small all-reduces of one
// number per row, never gathering the logits [N, V].
#pragma once

#include <cstdint>

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/comm/communicator.h"
#include "common/ops/grad_scale.h"

namespace lab::ch08::tp {

Var copy_to_tp_ranks(Tape& tape, const Var& x, comm::Communicator& tp_group);
// `bias` [K] may be undefined (no bias); partial is [..., K] (rows of K).
Var reduce_from_tp_ranks(Tape& tape, const Var& partial, const Var& bias, comm::Communicator& tp_group);

// wte_slice holds rows [vocab_start, vocab_start + S) of a table of vocab_rows rows; wpe [maxT, C].
Var vocab_parallel_embedding(Tape& tape, const Tensor& tokens, const Var& wte_slice, const Var& wpe,
                             int64_t vocab_start, int64_t vocab_rows, comm::Communicator& tp_group);

// As ag::cross_entropy over the whole logits (the losses of every row, the same on every rank; the gradient
// of grad_scale * mean(losses) written over this rank's logits when the tape records).
Tensor vocab_parallel_cross_entropy(Tape& tape, const Var& logits_slice, const Tensor& targets, int64_t vocab_start,
                                    int64_t vocab, const ops::GradScale& grad_scale, comm::Communicator& tp_group);

}  // namespace lab::ch08::tp
