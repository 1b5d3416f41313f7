// Causal multi-head self-attention without the T x T matrices: flash attention (Dao et al. 2022, FlashAttention-2
// 2023). Same inputs and outputs as attention.h, but instead of the probabilities the forward keeps one number
// per row, the log-sum-exp of its scaled scores, from which the backward recomputes the probabilities tile by
// tile. Memory grows as T, not T^2.
//   qkv [B,T,3C] holds q, k, v side by side, each [B,T,NH,HS] with HS = C/NH (as attention.h).
//   forward:  out[b,t,h,:] = sum_{s<=t} softmax_s(q_t . k_s / sqrt(HS)) v_s       out [B,T,C], dtype of qkv
//             lse[b,h,t]   = log sum_{s<=t} exp(q_t . k_s / sqrt(HS))              lse [B,NH,T], f32
//   backward: dqkv += the gradient of out's loss with respect to qkv, from dout [B,T,C], qkv, out and lse
//             (dqkv and dout in the dtype of qkv; accumulates, as attention_backward does, or with
//             GradWrite::Overwrite writes every element of dqkv without reading it: each element of dQ, dK
//             and dV is stored by exactly one tile, so qkv's gradient needs no zero-filling first)
// The algorithm, in tiles of Br queries and Bc keys:
//   forward   for each query tile: for each key tile at or below the diagonal: S = scale Q K^T; new row max m';
//             P = exp(S - m'); l = l exp(m - m') + rowsum(P); O = O exp(m - m') + P V; m = m'.
//             At the end O /= l and lse = m + log l.
//   backward  D = rowsum(dout * out) (a pre-pass); then P = exp(scale Q K^T - lse) recomputed, and
//             dV += P^T dO, dP = dO V^T, dS = P (dP - D), dK += scale dS^T Q, dQ += scale dS K.
//             dK and dV are summed per key tile. dQ, which every key tile adds to, two ways (FlashBackward):
//               TwoPasses  a second pass per query tile recomputes S, P, dP and dS and sums dQ privately: 7 tile
//                          products per tile pair, deterministic, no workspace (the default; see
//                          cuda/flash_attention.cu for why).
//               OnePass    dQ += scale dS K in the same pass as dK and dV: 5 tile products per pair. On the CPU one
//                          task per head walks its key tiles in order and sums dQ in an f32 [T, HS] scratch (the
//                          same sums in the same order as TwoPasses: the same bits). On CUDA the key tiles' blocks
//                          add into an f32 [B, T, C] workspace with atomicAdd (FlashAttention-2's choice), then one
//                          kernel writes it into dqkv: dQ's last bits then vary from run to run with the order of
//                          the atomics.
//
// Dtypes, by backend:
//   CPU   f32, bf16 and f16 storage, computed in f32 (16-bit tiles widened when loaded); any head size.
//   CUDA  bf16 and f16 on tensor cores (16-bit products, f32 accumulation), head sizes up to 128 (64 and 128
//         are the kernels' tile widths; smaller heads are zero-padded to 64 or 128). f32 inputs are not
//         flash attention on CUDA: they take the materialised path of attention.h (strict fp32 through cuBLAS,
//         T x T probabilities in a workspace that lives for the call), so f32 memory still grows as T^2.
//         16-bit heads wider than 128 are Unsupported. Shared memory per block (two buffers of each streamed
//         tile): up to 85 KiB forward and 103 KiB backward at head size 128 (45 and 55 KiB at 64).
#pragma once

#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

// The tile sizes both backends use (queries per tile, keys per tile).
inline constexpr int64_t kFlashQueryTile = 64;
inline constexpr int64_t kFlashKeyTile = 64;

// How the backward sums dQ (see above).
enum class FlashBackward { TwoPasses, OnePass };

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write = GradWrite::Add,
                              FlashBackward passes = FlashBackward::TwoPasses);

namespace cpu {
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes);
}  // namespace cpu
namespace cuda {
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes);
}  // namespace cuda

}  // namespace lab::ops
