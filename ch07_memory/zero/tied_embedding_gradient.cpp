// The tied embedding's gradient in chunks (see tied_embedding_gradient.h).
#include "ch07_memory/zero/tied_embedding_gradient.h"

#include <algorithm>
#include <utility>

#include "common/autograd/function_support.h"
#include "common/core/memory.h"
#include "common/ops/embedding.h"
#include "common/ops/linear.h"

namespace lab::ch07 {

TiedEmbeddingGradient::TiedEmbeddingGradient(int64_t vocab_rows, int64_t width, int ranks, int64_t rows_per_rank,
                                             int64_t chunk_elements, ReduceChunk reduce)
    : vocab_rows_(vocab_rows),
      width_(width),
      ranks_(ranks),
      rows_per_rank_(rows_per_rank),
      chunk_rows_(std::clamp<int64_t>(chunk_elements / (width * ranks), 1, std::max<int64_t>(1, rows_per_rank))),
      reduce_(std::move(reduce)) {}

void TiedEmbeddingGradient::for_each_chunk(
    const Device& device, const std::function<void(const Tensor& piece, int64_t first_row)>& fill) const {
  for (int64_t first = 0; first < rows_per_rank_; first += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, rows_per_rank_ - first);
    Tensor pack;
    {
      MemoryScope scope(MemCategory::Grads);  // the gradient in flight: zeros where a rank's rows are padding
      pack = Tensor::zeros({ranks_ * rows, width_}, DType::F32, device);
    }
    for (int r = 0; r < ranks_; ++r) {
      const int64_t begin = r * rows_per_rank_ + first, end = std::min(begin + rows, vocab_rows_);
      if (end > begin) fill(pack.slice_rows(r * rows, r * rows + (end - begin)), begin);
    }
    reduce_(first, rows, pack);
  }
}

Var TiedEmbeddingGradient::lm_head(Tape& tape, const Var& x, const Var& wte) const {
  const MemoryOpScope op("linear");
  Shape shape = x.value().shape();
  shape.back() = wte.value().dim(0);
  Var out(ag::new_activation(shape, x.value()), tape.recording() && ag::any_requires_grad({&x, &wte}));
  ops::linear_forward(out.value(), x.value(), wte.value(), Tensor());
  if (out.requires_grad())
    tape.record("linear", {x.value()},
                [this, x, wte, out = out.without_value()] {
                  // wte's value is read when the step runs (stage 3 gathers it again for this backward).
                  const ag::GradientTarget dx = ag::gradient_target(x);
                  ops::linear_backward(dx.grad, Tensor(), Tensor(), out.grad(), x.value(), wte.value(), dx.write);
                  if (!wte.requires_grad()) return;
                  for_each_chunk(x.value().device(), [&](const Tensor& piece, int64_t first_row) {
                    ops::linear_weight_grad_rows(piece, out.grad(), x.value(), first_row);
                  });
                },
                {x});
  return out;
}

Var TiedEmbeddingGradient::embedding(Tape& tape, const Tensor& tokens, const Var& wte, const Var& wpe) const {
  const MemoryOpScope op("embedding");
  const int64_t T = tokens.dim(1), C = wte.value().dim(1);
  Var out(ag::new_activation({tokens.dim(0), T, C}, wte.value()),
          tape.recording() && ag::any_requires_grad({&wte, &wpe}));
  ops::embedding_forward(out.value(), tokens, wte.value(), wpe.value());
  if (out.requires_grad())
    tape.record("embedding", {},
                [this, tokens, wte, wpe, device = out.value().device(), out = out.without_value()] {
                  // The positions' gradient whole, as the plain lookup makes it; the tokens' in chunks.
                  if (wpe.requires_grad()) ops::embedding_backward_rows(Tensor(), wpe.grad(), out.grad(), tokens, 0);
                  if (!wte.requires_grad()) return;
                  for_each_chunk(device, [&](const Tensor& piece, int64_t first_row) {
                    ops::embedding_backward_rows(piece, Tensor(), out.grad(), tokens, first_row);
                  });
                },
                {wpe});
  return out;
}

}  // namespace lab::ch07
