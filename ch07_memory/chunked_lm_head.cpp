// The LM head and its loss chunk by chunk (see chunked_lm_head.h).
#include "ch07_memory/chunked_lm_head.h"

#include <algorithm>

#include "common/autograd/function_support.h"
#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/nn/low_precision_linear.h"
#include "common/ops/linear.h"

namespace lab::ch07 {

std::vector<std::string> lm_head_names() {
  return {"full", "chunked"};
}

LmHead parse_lm_head(const std::string& name) {
  if (name == "full") return LmHead::Full;
  if (name == "chunked") return LmHead::Chunked;
  fail(ErrorKind::InvalidArgument, "--lm-head: '", name, "' is not one of full|chunked");
}

const char* lm_head_name(LmHead head) {
  return head == LmHead::Chunked ? "chunked" : "full";
}

void use_lm_head(ModelOptions& options, LmHead head, int64_t chunk_rows) {
  LAB_CHECK(chunk_rows >= 0, InvalidArgument, "--lm-head-rows must be >= 0 (0: the default chunk), got ", chunk_rows);
  LAB_CHECK(head == LmHead::Chunked || chunk_rows == 0, InvalidArgument, "--lm-head-rows ", chunk_rows,
            " sets the rows of the chunked head's chunks: it needs --lm-head chunked");
  if (head == LmHead::Full) return;
  LAB_CHECK(!options.tensor_parallel, InvalidArgument,
            "--lm-head chunked runs on one tensor-parallel rank only (the vocabulary-parallel loss keeps its "
            "logits: use --lm-head full with --tp)");
  options.head_loss = [chunk_rows](Tape& tape, const Var& h, const Linear& head, const Tensor& targets, int64_t vocab,
                                   const ops::GradScale& grad_scale, const ModelOptions& o) {
    return chunked_head_loss(tape, h, head, targets, vocab, grad_scale, o, chunk_rows);
  };
}

int64_t lm_head_chunk_rows(int64_t rows, int64_t vp, int64_t width) {
  constexpr int64_t kTile = 64;
  const int64_t chunks = (vp + width - 1) / std::max<int64_t>(width, 1);
  const int64_t per_chunk = (rows + chunks - 1) / std::max<int64_t>(chunks, 1);
  return std::max<int64_t>(1, std::min(rows, (per_chunk + kTile - 1) / kTile * kTile));
}

Tensor chunked_head_loss(Tape& tape, const Var& h, const Linear& head, const Tensor& targets, int64_t vocab,
                         const ops::GradScale& grad_scale, const ModelOptions& options, int64_t chunk_rows) {
  const MemoryOpScope op("lm_head+loss (chunked)");
  const Tensor& hv = h.value();
  const Var& wte = head.weight;
  const Tensor weight = head.matmul_weight();
  const int64_t C = hv.dim(-1), N = hv.numel() / C, Vp = weight.dim(0);
  LAB_CHECK(targets.numel() == N, InvalidArgument, "chunked_head_loss: ", targets.numel(), " targets for ", N, " rows");
  LAB_CHECK(chunk_rows >= 0, InvalidArgument, "chunked_head_loss: chunk_rows must be >= 0, got ", chunk_rows);
  const bool with_grad = tape.recording() && ag::any_requires_grad({&h, &wte});
  // The mean's gradient, as ag::cross_entropy gives it: each row's loss weighs 1/N of the whole.
  const ops::GradScale dloss = ag::mean_loss_gradient(with_grad, grad_scale, N, "chunked_head_loss");

  const Tensor losses = ag::empty_as({N}, DType::F32, hv.device(), MemCategory::Activations);
  // h's gradient, its rows written over chunk by chunk (h feeds this head alone).
  const Tensor dh = with_grad && h.requires_grad()
                        ? ag::empty_as({N, C}, hv.dtype(), hv.device(), MemCategory::Activations)
                        : Tensor();
  const Tensor rows_h = matmul_operand(hv, weight.dtype()).reshape({N, C});
  const Tensor flat_targets = targets.reshape({N});
  const int64_t chunk = std::min(N, chunk_rows > 0 ? chunk_rows : lm_head_chunk_rows(N, Vp, C));
  const Tensor logits_buffer = ag::empty_as({chunk, Vp}, hv.dtype(), hv.device(), MemCategory::Workspace);
  const Tensor dwte = with_grad ? wte.grad_or_none() : Tensor();
  for (int64_t first = 0; first < N; first += chunk) {
    const int64_t end = std::min(N, first + chunk);
    const Tensor logits = logits_buffer.slice_rows(0, end - first);
    const Tensor x = rows_h.slice_rows(first, end);
    ops::linear_forward(logits, x, weight, Tensor());
    options.classifier(logits, losses.slice_rows(first, end), flat_targets.slice_rows(first, end), vocab, dloss);
    if (with_grad)  // the logits now hold their gradient
      ops::linear_backward(dh.defined() ? dh.slice_rows(first, end) : Tensor(), dwte, Tensor(), logits, x, weight,
                           ops::GradWrite::Overwrite);
  }
  if (!with_grad) return losses;
  if (dh.defined()) h.bind_grad(dh.reshape(hv.shape()));
  // A step with nothing left to do, that names wte among what it adds to: wte's gradient hook (a data-parallel
  // reducer's, the optimizer in backward's) then counts this head's share as every other's, and on a pipeline's
  // last stage, where no embedding follows, it runs once backward starts.
  if (wte.requires_grad()) tape.record("lm_head+loss (chunked: done in forward)", {}, [] {}, {wte});
  return losses;
}

}  // namespace lab::ch07
