// The part of GPT-2 one rank holds under tensor and pipeline parallelism, and how tensor parallelism cuts
// each parameter (Megatron-LM's layout).
//
// Pipeline parallelism gives each stage a contiguous range of blocks: the first stage also holds the
// embeddings (wte, wpe), the last one the final LayerNorm and the LM head, which is tied to wte, so with two
// or more stages the first and the last stage each hold a copy of wte (chapter 8 keeps the copies equal).
//
// Tensor parallelism cuts the matmuls of every block and the vocabulary across the tp ranks:
//
//   parameter                 split      this rank holds (r of t)
//   attn.c_attn  [3C, C]      QkvRows    rows of its heads in each of q, k and v: [3C/t, C]
//   mlp.c_fc     [4C, C]      Rows       rows [r 4C/t, (r+1) 4C/t): [4C/t, C]       (column-parallel)
//   *.c_proj     [C, K]       Columns    columns [r K/t, (r+1) K/t): [C, K/t]        (row-parallel)
//   wte          [Vp, C]      Rows       rows of its vocabulary slice: [Vp/t, C]
//   biases of c_attn, c_fc    as their weight's rows
//   c_proj biases, wpe, LayerNorms       Replicated (every rank holds all of it)
//
// so each rank computes its own heads and its own slice of the MLP's hidden units, and the only
// communication is one all-reduce after each row-parallel layer (and its mirror image in backward). The
// padded vocabulary Vp is padded further under tensor parallelism so that every rank's slice is a multiple
// of 128 rows (GPT2Config::padded_vocab_for).
#pragma once

#include <string>

#include "common/core/tensor.h"
#include "common/nn/config.h"

namespace lab {

struct ModelShard {
  int tp_rank = 0;
  int tp_size = 1;
  int first_block = 0;
  int end_block = -1;         // one past this shard's last block; -1: up to the last block of the model
  bool has_embedding = true;  // wte and wpe: the first pipeline stage
  bool has_head = true;       // ln_f and the LM head (tied to wte): the last pipeline stage

  // Rank (tp_rank, pp_rank) of a tp_size x pp_size grid: blocks split evenly across the stages (stage s
  // gets blocks [s L / P, (s+1) L / P)). InvalidArgument when a rank is out of range, the heads or the
  // MLP's width do not divide among the tp ranks, or there are more stages than blocks.
  static ModelShard of_rank(const GPT2Config& config, int tp_rank, int tp_size, int pp_rank, int pp_size);

  // end_block with -1 resolved.
  int block_end(const GPT2Config& config) const { return end_block < 0 ? config.n_layer : end_block; }
  bool holds_block(const GPT2Config& config, int block) const {
    return first_block <= block && block < block_end(config);
  }
  // The whole model on one rank: what a single-process run builds.
  bool whole(const GPT2Config& config) const {
    return tp_size == 1 && first_block == 0 && block_end(config) == config.n_layer && has_embedding && has_head;
  }
  // InvalidArgument naming what is wrong when this shard does not fit `config`.
  void validate(const GPT2Config& config) const;
  std::string str(const GPT2Config& config) const;  // "tp 1/2, blocks [0, 6), embedding"
};

// How tensor parallelism cuts a parameter (see the table above).
enum class TpSplit { Replicated, Rows, Columns, QkvRows };
TpSplit tp_split_of(const std::string& parameter_name);

// The shape one of `tp` ranks holds of a parameter whose full shape is `full`.
Shape tp_shard_shape(const Shape& full, TpSplit split, int tp);
// Rank `rank`'s part of the full tensor (on the CPU, f32), a new tensor.
Tensor tp_slice(const Tensor& full, TpSplit split, int rank, int tp);
// The full tensor from every rank's part, concatenated in rank order in `parts` ([tp x shard numel], on the
// CPU, f32: what an all-gather of the parts gives).
Tensor tp_join(const Tensor& parts, TpSplit split, const Shape& full, int tp);

}  // namespace lab
