// What a tensor-parallel shard of GPT-2 needs from outside the core: the communication of Megatron-LM's
// layers, as differentiable functions over the ranks that share the shard's layers (the tp group).
//
// The core never communicates. A model built for a tensor-parallel shard (ModelShard::tp_size > 1) calls
// these functions at the four places where Megatron's layers talk; chapter 8 implements them over its
// Communicator (ch08_distributed/tp/). In Megatron's notation:
//
//   f  copy_to_tp_ranks       identity forward, all-reduce of the gradient backward: in front of a
//                             column-parallel layer, whose input every rank uses whole
//   g  reduce_from_tp_ranks   all-reduce forward (the partial sums of a row-parallel layer, then its bias,
//                             added once), identity backward
//
// and the two vocabulary-parallel functions, which each rank computes over its slice of the vocabulary.
#pragma once

#include <cstdint>

#include "common/autograd/tape.h"
#include "common/autograd/var.h"
#include "common/ops/grad_scale.h"

namespace lab {

class TensorParallelFunctions {
 public:
  virtual ~TensorParallelFunctions() = default;

  // The number of ranks in the tp group and this rank's place in it.
  virtual int tp_size() const = 0;
  virtual int tp_rank() const = 0;

  // f: returns x unchanged; in backward, the gradient summed over the tp ranks.
  virtual Var copy_to_tp_ranks(Tape& tape, const Var& x) const = 0;
  // g: the sum over the tp ranks of `partial` [..., C], plus `bias` [C] (undefined: none); in backward, the
  // gradient passes to `partial` unchanged and the bias gets its row sum on every rank.
  virtual Var reduce_from_tp_ranks(Tape& tape, const Var& partial, const Var& bias) const = 0;

  // wte[tokens] + wpe[positions] [B, T, C], where this rank holds rows [vocab_start, vocab_start +
  // wte_slice rows) of wte and every rank holds wpe: each rank looks up the tokens of its slice (zeros for
  // the others), then the ranks sum.
  virtual Var vocab_parallel_embedding(Tape& tape, const Tensor& tokens, const Var& wte_slice, const Var& wpe,
                                       int64_t vocab_start) const = 0;

  // Cross-entropy of logits split by vocabulary, as ag::cross_entropy for the whole logits: this rank holds
  // columns [vocab_start, vocab_start + Vp/tp) of logits [..., Vp], of which the first `vocab` of the whole
  // are real. Returns the per-row losses (the same on every rank); when the tape records, the gradient of
  // grad_scale * mean(losses) with respect to this rank's columns is written over them.
  virtual Tensor vocab_parallel_cross_entropy(Tape& tape, const Var& logits_slice, const Tensor& targets,
                                              int64_t vocab_start, int64_t vocab,
                                              const ops::GradScale& grad_scale) const = 0;
};

}  // namespace lab
