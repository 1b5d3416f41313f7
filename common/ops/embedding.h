// Token + position embedding (GPT-2's encoder).
//   forward:  out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]
//   backward: dwte[tokens[b,t], :] += dout[b,t,:];  dwpe[t,:] += sum_b dout[b,t,:]   (accumulates; with dwpe_write
//             Overwrite, a training step's first contribution to wpe, dwpe[t,:] = sum_b ..., and its rows that no
//             position reaches, past T or all of them when B = 0, are zeroed)
// Shapes: tokens [B,T] i32, wte [Vp,C], wpe [maxT,C] with T <= maxT, out/dout [B,T,C].
// Dtypes: the activations out and dout are f32, or bf16 / f16 with fp32 arithmetic inside: out is the f32 sum
// wte + wpe rounded once, when stored; each 16-bit dout element is widened to f32 exactly. wte, wpe, dwte and dwpe
// are f32 whatever the activations are: they are the fp32 master parameters and their gradients, which sum over
// every position holding a token (16-bit storage would round those sums away).
// The CPU backend rejects token ids outside [0, Vp) with InvalidArgument.
#pragma once

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write = GradWrite::Add);
// The backward for a slice of the vocabulary: dwte_rows [S, C] holds rows [first_row, first_row + S) of wte's
// gradient, and the tokens outside them add nothing there (a vocabulary-parallel shard's slice, chapter 8; a chunk
// of ZeRO's sharded gradient, chapter 7). Either gradient may be undefined: it is not computed. All f32: a
// 16-bit dout is refused with InvalidArgument (only embedding_backward takes one).
void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row);

namespace cpu {
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write);
void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row);
}  // namespace cpu
namespace cuda {
void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write);
void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row);
}  // namespace cuda

}  // namespace lab::ops
