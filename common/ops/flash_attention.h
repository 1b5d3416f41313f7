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
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/ops/grad_write.h"

namespace lab::ops {

// The tile sizes both backends use (queries per tile, keys per tile).
inline constexpr int64_t kFlashQueryTile = 64;
inline constexpr int64_t kFlashKeyTile = 64;

// How the backward sums dQ (see above).
enum class FlashBackward { TwoPasses, OnePass };

// Which CUDA kernels compute it, for bf16/f16 heads of 64 (the CPU has one set of loops, and heads of 128 one set
// of kernels: two strips a warp would not fit the registers there). Every set gives the same bits, forward and
// backward: the tile height changes how many rows a block owns and how often a fragment read from shared memory
// is reused, not any value's sums or their order (test_flash_attention_cuda, FlashGpuTiles).
//   Rows64          64-row tiles, one strip of 16 rows a warp (chapter 9's attention lab, v7)
//   Rows128         128-row tiles, two strips a warp: the forward on 128-query tiles (v11), the dK/dV kernel on
//                   128-key tiles and the dQ kernel on 128-query tiles (v12)
//   Rows128Steps16  Rows128 with the dK/dV kernel stepping through 16 queries at a time instead of 32 (v13)
//   Timed           the fastest of the three on this GPU, timed at each shape's first call (below)
// Timed: the first call at a (pass, dtype, batch, heads, T, head size) on a device queues each set once to load it
// and three times between two CUDA events, waits for the stream (one host synchronisation), keeps the fastest for
// every later call at that shape, and runs it. The timed runs write `out` and `lse`, or with GradWrite::Overwrite
// `dqkv`, which the chosen set then writes again; a backward that adds into dqkv times into a workspace of its
// shape instead. Under stream capture (a CUDA graph), where nothing can be timed, a shape not yet timed runs
// Rows64. The one-pass backward has its own kernels and ignores the choice.
enum class FlashTiles { Rows64, Rows128, Rows128Steps16, Timed };

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head,
                             FlashTiles tiles = FlashTiles::Rows64);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write = GradWrite::Add,
                              FlashBackward passes = FlashBackward::TwoPasses, FlashTiles tiles = FlashTiles::Rows64);

// "rows 64", "rows 128", "rows 128, steps of 16", "timed".
const char* flash_tiles_name(FlashTiles tiles);

// One line per shape that FlashTiles::Timed has timed in this process so far, in the order they were timed: the
// pass and shape, the set chosen, and every set's time, e.g.
//   "flash backward bf16 B 8 x 12 heads x T 1024, head size 64: rows 128 (rows 64: 0.3420 ms | rows 128: 0.3010 ms
//    | rows 128, steps of 16: 0.3100 ms)"
// Empty without CUDA, or before the first timed call.
std::vector<std::string> flash_tile_choices();

namespace cpu {
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, FlashTiles tiles);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes,
                              FlashTiles tiles);
}  // namespace cpu
namespace cuda {
void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, FlashTiles tiles);
void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes,
                              FlashTiles tiles);
std::vector<std::string> flash_tile_choices();
}  // namespace cuda

}  // namespace lab::ops
