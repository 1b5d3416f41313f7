// GPT-2's tied token embedding under ZeRO stages 2 and 3: its gradient reduce-scattered chunk by chunk as
// backward makes it, never whole.
//
// wte [Vp, C] is the model's largest parameter (d12: 38.6M of 124M, 147 MiB of gradient), and it is used twice:
// the LM head's backward makes its first contribution to the gradient, at the start of backward, the lookup's
// backward the second, at the very end. Made whole, each contribution would be the largest gradient a rank
// holds beside its shard, and at the start of backward it would come on top of the activations' peak. So the
// two functions here replace the model's LM head and lookup (ModelOptions::lm_head, ::embedding; same values,
// same forward) and make the gradient in chunks: rank r owns rows [r R, (r + 1) R) of wte (R = ceil(Vp / D),
// whole rows: shards.h), and chunk j is rows [r R + j S, r R + (j + 1) S) of every rank's block at once, packed
// rank after rank, so that one reduce-scatter of the chunk hands each rank its own rows (the caller's `reduce`,
// which adds them into the gradient shard). A chunk is freed when reduced; S rows of every rank make at most the
// caller's chunk budget (a bucket). The LM head's piece of a chunk is a GEMM on S columns of the logits'
// gradient (ops::linear_weight_grad_rows), the lookup's the rows its tokens hit (ops::embedding_backward_rows);
// wpe's gradient, a bucket of its own, is made whole as the plain lookup makes it. What it costs: the head's product
// in ranks x chunks GEMMs instead of one (the same FLOPs), and the lookup's pieces each read the
// whole output gradient (ranks x chunks passes over B T C values instead of one); a reduce-scatter per chunk.
//
// Neither function names wte among the gradients it adds to (it adds to none), and its bucket is the caller's
// to count as reduced. Under mixed precision the model keeps its 16-bit LM head (ModelOptions::lm_head is
// fp32's): that head makes its contribution whole and names wte, whose gradient hook then runs once, right after
// it, and the caller reduces it as it reduces any bucket.
#pragma once

#include <cstdint>
#include <functional>

#include "common/autograd/tape.h"

namespace lab::ch07 {

class TiedEmbeddingGradient {
 public:
  // Reduces one chunk: `pack` [ranks x rows, C] holds rows [r R + first_row, + rows) of rank r's block at
  // rows [r rows, (r + 1) rows); the caller reduce-scatters it and adds its own part at row `first_row` of its
  // block.
  using ReduceChunk = std::function<void(int64_t first_row, int64_t rows, const Tensor& pack)>;

  // For wte of `vocab_rows` x `width` over `ranks` ranks owning `rows_per_rank` rows each, with chunks of at most
  // `chunk_elements` elements (at least one row of each rank).
  TiedEmbeddingGradient(int64_t vocab_rows, int64_t width, int ranks, int64_t rows_per_rank, int64_t chunk_elements,
                        ReduceChunk reduce);

  // x @ wte^T, as a linear without bias; backward adds x's gradient and reduces wte's, chunk by chunk.
  Var lm_head(Tape& tape, const Var& x, const Var& wte) const;
  // wte[tokens] + wpe[positions], as ag::embedding; backward adds wpe's gradient and reduces wte's.
  Var embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe) const;

 private:
  // Fills each chunk with `fill(piece, first_row)`, called for each rank's rows in the vocabulary (`piece`
  // [rows, C], zeroed, whose first row is row `first_row` of wte), then reduces it.
  void for_each_chunk(const Device& device,
                      const std::function<void(const Tensor& piece, int64_t first_row)>& fill) const;

  int64_t vocab_rows_, width_;
  int ranks_;
  int64_t rows_per_rank_, chunk_rows_;
  ReduceChunk reduce_;
};

}  // namespace lab::ch07
