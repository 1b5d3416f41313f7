// The kernels of Megatron's vocabulary-parallel layers and of the bias that a row-parallel layer adds after
// its all-reduce. Each rank calls them on its own slice; the communication between the passes is the
// caller's (ch08_distributed/tp/functions.h). CPU reference in cpu/, CUDA kernels in cuda/.
//
// A rank holds rows [vocab_start, vocab_start + S) of the embedding wte (S = its rows), and so columns
// [vocab_start, vocab_start + S) of the logits; the whole vocabulary has `vocab` real entries, the rest is
// padding. Token ids and targets are global ids.
//
// Embedding (tokens [B,T] i32, wte_slice [S,C], out [B,T,C]):
//   forward   out[b,t,:] = wte_slice[tokens[b,t] - vocab_start, :] if the token is in this slice, else 0
//   backward  dwte_slice[tokens[b,t] - vocab_start, :] += dout[b,t,:] for the tokens in this slice: the core's
//             ops::embedding_backward_rows (common/ops/embedding.h), which chapter 7's ZeRO uses too
//   A token outside [0, vocab_rows), the whole table, is InvalidArgument on the CPU and a NaN row on CUDA
//   (which does not check, as that would cost a host synchronisation).
//
// Cross-entropy (logits_slice [N,S] f32, targets [N] i32 in [0, vocab)), in three passes; between them the
// caller all-reduces over the tp ranks:
//   1. row_max[n]      = max over this slice's real columns (-inf when it has none)
//      target_logit[n] = logits[n, targets[n]] when the target is in this slice, else 0
//        -> all-reduce row_max (max) and target_logit (sum): the global max and the target's logit
//   2. sum_exp[n]      = sum over this slice's real columns of exp(logits - row_max)
//        -> all-reduce sum_exp (sum)
//   3. losses[n]       = log(sum_exp[n]) + row_max[n] - target_logit[n]; when dloss != 0 the slice is
//      overwritten with its gradient dloss (softmax - onehot(target)) on real columns, 0 on padding; dloss is a
//      number, or its value times a scale on the device (ops::GradScale: fp16's loss scale)
//   A target outside [0, vocab) is InvalidArgument on the CPU and a NaN loss and gradient row on CUDA.
//
// Bias (x [..., K] seen as [N, K] with K = bias's element count, bias [K]):
//   add_bias       x[n, :] += bias
//   add_bias_grad  dbias += sum_n dout[n, :]     (a fixed order of additions on both backends)
#pragma once

#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/grad_scale.h"

namespace lab::ch08::tp {

void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows);

void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit);
void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp);
void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss);

void add_bias(const Tensor& x, const Tensor& bias);
void add_bias_grad(const Tensor& dbias, const Tensor& dout);

namespace cpu {
void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows);
void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit);
void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp);
void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss);
void add_bias(const Tensor& x, const Tensor& bias);
void add_bias_grad(const Tensor& dbias, const Tensor& dout);
}  // namespace cpu
namespace cuda {
void vocab_slice_embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte_slice,
                                   int64_t vocab_start, int64_t vocab_rows);
void vocab_slice_max_and_target(const Tensor& logits_slice, const Tensor& targets, int64_t vocab_start, int64_t vocab,
                                const Tensor& row_max, const Tensor& target_logit);
void vocab_slice_sum_exp(const Tensor& logits_slice, const Tensor& row_max, int64_t vocab_start, int64_t vocab,
                         const Tensor& sum_exp);
void vocab_slice_loss_and_grad(const Tensor& logits_slice, const Tensor& losses, const Tensor& targets,
                               const Tensor& row_max, const Tensor& sum_exp, const Tensor& target_logit,
                               int64_t vocab_start, int64_t vocab, const ops::GradScale& dloss);
void add_bias(const Tensor& x, const Tensor& bias);
void add_bias_grad(const Tensor& dbias, const Tensor& dout);
}  // namespace cuda

}  // namespace lab::ch08::tp
