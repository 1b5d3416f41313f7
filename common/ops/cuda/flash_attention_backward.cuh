// The backward kernels of the register flash attention (common/ops/cuda/flash_attention.cu says how the kernels
// work), each for tiles of kWarps x R strips of 16 rows, every warp owning R strips from start to end: the dK/dV
// kernel's strips are keys, the dQ kernel's queries.
//
//   R = 1   64-row tiles: the core's op (v7 of chapter 9's attention lab).
//   R = 2   128-row tiles, 32 rows a warp: the lab's v12, as FlashAttention-2 tiles its backward at head size 64
//           (128 keys a block).
//
// What R changes. In the dK/dV kernel, of a step's four products the two with the warp's keys as A (S^T = K Q^T,
// dP^T = V dO^T) read each Q or dO fragment (B) once for all R strips, and so do the two with P^T or dS^T as A,
// from registers (dV += P^T dO, dK += dS^T Q). Per warp and 64-query tile at head size 64: R = 1 reads 80
// ldmatrix.x4 for 128 mma.sync (320 bytes of shared memory a product), R = 2 96 for 256 (192 bytes). In the dQ
// kernel each K or V fragment feeds every strip the same way: per warp and 64-key tile, R = 1 reads 56 for 96 (299
// bytes), R = 2 80 for 192 (213 bytes; its steps of 32 keys read the warp's Q and dO fragments twice a tile). And a
// tile copied into shared memory serves 128 rows instead of 64, so each head's streamed tiles are read from L2
// T / 128 times instead of T / 64. The price: twice the registers of the accumulators (dK and dV: 128 f32 a thread
// at head size 64), so fewer warps per SM, and a coarser grid. At sm_90 (nvcc 13 -O3, ptxas -v; no spills), head
// size 64: R = 1 takes 163 (dK/dV) and 168 (dQ) registers, 3 blocks (12 warps) per SM; R = 2 255 and 231, 2 blocks
// (8 warps) per SM. At head size 128 the dK and dV accumulators alone (256 f32) exceed a thread's 255 registers:
// the launcher takes R = 1 there for both kernels (244 and 234 registers).
//
// The causal mask with R strips. The dK/dV kernel walks the query tiles from the one holding the block's first key
// to the end; a warp skips a tile whose queries all precede its first key (R = 2: the upper half of the block's keys
// starts one query tile later), runs one where every query sees every key of the warp without the mask's
// arithmetic, and the others with it; on those, strip r skips the query groups that precede its first key. The dQ
// kernel walks the key tiles 0 .. the block's diagonal as the forward does, a warp skipping those whose keys all lie
// past its last query. Per key (dK, dV) and per query (dQ), the tiles, the products and their order are those of
// R = 1: the two give the same bits (test_ch09_flash_attention_cuda checks it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>

#include <cstddef>
#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_pipeline.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"

namespace lab::ops::cuda::flash {

// Strips a warp of the backward kernels can own at head width D: 2 only at 64 (see the top of the file).
template <int D, int R>
inline constexpr int kBackwardStrips = D == 64 ? R : 1;

// Keys per step of the dQ kernel: a whole 64-key tile with one strip; with two, the S, dP and dS fragments of 64
// keys for both strips would sit next to their dQ accumulators (192 f32 a thread at head size 64: ptxas spilled 48
// bytes), so 32.
template <int R>
inline constexpr int kQueryGradsStep = R == 1 ? kTile : 32;

// Blocks per SM each kernel is compiled for (__launch_bounds__): ptxas caps the registers at 64K / (128 x this).
// Chosen so that none spills at sm_90. Unused where __launch_bounds__ means nothing (the emulation build).
template <int D, int R>
[[maybe_unused]] inline constexpr int kKeyGradsBlocks = D == 64 && R == 1 ? 3 : 2;
template <int D, int R>
[[maybe_unused]] inline constexpr int kQueryGradsBlocks = D == 64 && R == 1 ? 3 : 2;

// Shared memory, in [64, D] 16-bit tiles: the dK/dV kernel's K and V tiles (R each), two buffers each of Q and dO,
// and two buffers of a query tile's lse and D; the dQ kernel's Q and dO tiles (R each) and two buffers each of K
// and V.
template <int D>
constexpr size_t tile_bytes() {
  return piece_bytes<uint16_t>(kTile * kLdTile<D>);
}
template <int D, int R>
constexpr size_t key_grads_shared_bytes() {
  return (2 * R + 4) * tile_bytes<D>() + 4 * piece_bytes<float>(kTile);
}
template <int D, int R>
constexpr size_t query_grads_shared_bytes() {
  return (2 * R + 4) * tile_bytes<D>();
}

// ---------------------------------------------------------------- dK, dV

// One query tile of the dK/dV kernel for the warp's R strips of 16 keys (strip r: keys key0 + 16 r ..), a step of
// queries at a time. S^T = K Q^T; P^T = exp(scale S^T - lse) where the query sees the key; dV += P^T dO;
// dP^T = V dO^T; dS^T = P^T (dP^T - D); dK += dS^T Q (scaled once at the end). kMasked: a tile where some query
// precedes some key of the warp, or that runs past T; strip r skips the query groups before live + 16 r (live: the
// warp's first key less the tile's first query, negative where the tile lies past it).
template <bool kMasked, typename E, int D, int R, int kStep>
__device__ inline void key_grads_query_tile(float dk[R][D / 8][4], float dv[R][D / 8][4], const E* k, const E* v,
                                            const E* q, const E* dO, const float* tile_lse, const float* tile_D,
                                            int strip, int key0, int t0, int live, const Dims& s, float scale_log2) {
#pragma unroll 1
  for (int c0 = 0; c0 < kTile; c0 += kStep) {
    if (kMasked && c0 + kStep <= live) continue;
    float p[R][kStep / 8][4];
    strips_times_tile_t<E, D, kStep, R, kMasked>(p, k, strip, q, c0, live);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < kStep / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = c0 + frag_col(n, i);
          p[r][n][i] = exp2f(fmaf(p[r][n][i], scale_log2, -tile_lse[c] * kLog2e));
          if (kMasked) {
            const int key = key0 + r * kStrip + frag_row(i), query = t0 + c;
            if (query < key || query >= s.T) p[r][n][i] = 0.0f;
          }
        }
    strips_probs_times_tile<E, D, kStep, R, kMasked>(dv, p, dO, c0, live);

    float ds[R][kStep / 8][4];
    strips_times_tile_t<E, D, kStep, R, kMasked>(ds, v, strip, dO, c0, live);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < kStep / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) ds[r][n][i] = p[r][n][i] * (ds[r][n][i] - tile_D[c0 + frag_col(n, i)]);
    strips_probs_times_tile<E, D, kStep, R, kMasked>(dk, ds, q, c0, live);
  }
}

// Queries per step of the dK/dV kernel: kQueryStep (flash_attention_fragments.cuh), 32 by default; the f32 fragments
// of P^T and dS^T for a step's queries live next to the dK and dV accumulators (64 would not fit the registers at
// head size 128). With two strips at head size 64 that is 128 f32 of accumulators and 64 of fragments: ptxas fits
// it in 255 registers without a spill; steps of 16 (the lab's v13) take 244, for 256 bytes of shared memory a
// product instead of 192 (the warp's K and V fragments read twice as often).
template <typename E, int D, int R, int kStep = kQueryStep>
__global__ void __launch_bounds__(kThreads, kKeyGradsBlocks<D, R>)
    flash_key_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                           int query_tiles, bool add) {
  constexpr int kRows = R * kTile;       // keys of the block's tile
  constexpr int kWarpRows = R * kStrip;  // keys of a warp
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* k = pieces.take<E>(kRows * kLdTile<D>);
  E* v = pieces.take<E>(kRows * kLdTile<D>);
  const TilePair<E, D> q = take_pair<E, D>(pieces), dO = take_pair<E, D>(pieces);
  float* rows = pieces.take<float>(4 * kTile);  // two buffers of a query tile's lse, then its D

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int s0 = static_cast<int>(blockIdx.y) * kRows;    // the first key tiles see the most queries: they start first
  const int strip = threadIdx.x / kWarpSize * kWarpRows;  // the warp's first row in the tile
  const int key0 = s0 + strip, warp_last_key = key0 + kWarpRows - 1;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);
  const float scale_log2 = s.scale * kLog2e;
  const int first_tile = s0 / kTile;  // the query tile of the block's first key: earlier queries see none of its keys

  // Batch 0: the block's K and V tiles and the first query tile's Q and dO.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    issue_tile<D>(k + r * kTile * kLdTile<D>, qkv + head + s.C, s0 + r * kTile, s, ld);
    issue_tile<D>(v + r * kTile * kLdTile<D>, qkv + head + 2 * s.C, s0 + r * kTile, s, ld);
  }
  issue_query_tile<D>(q, dO, rows, qkv + head, dout_head, lse, D_rows, bh, first_tile, s, ld);
  __pipeline_commit();
  float dk[R][D / 8][4] = {}, dv[R][D / 8][4] = {};

  for (int qt = first_tile; qt < query_tiles; ++qt) {
    const int t0 = qt * kTile;
    const bool next = qt + 1 < query_tiles;
    if (next) {  // into the buffers of tile qt - 1, which every warp finished before the last barrier
      issue_query_tile<D>(q, dO, rows, qkv + head, dout_head, lse, D_rows, bh, qt + 1, s, ld);
      __pipeline_commit();
    }
    wait_for_current_tile(next);
    __syncthreads();  // every thread's copies of tile qt have landed
    const float* tile_lse = rows + (qt % 2) * 2 * kTile;
    const float* tile_D = tile_lse + kTile;
    if (t0 + kTile <= key0) {
      // every query of the tile precedes every key of the warp (R > 1 only)
    } else if (t0 < warp_last_key || t0 + kTile > s.T) {
      key_grads_query_tile<true, E, D, R, kStep>(dk, dv, k, v, q[qt], dO[qt], tile_lse, tile_D, strip, key0, t0,
                                                 key0 - t0, s, scale_log2);
    } else {
      key_grads_query_tile<false, E, D, R, kStep>(dk, dv, k, v, q[qt], dO[qt], tile_lse, tile_D, strip, key0, t0, 0, s,
                                                  scale_log2);
    }
    __syncthreads();  // every warp is done with tile qt's buffers
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    add_fragments<D>(dqkv + head + s.C, ld, key0 + r * kStrip, dk[r], s.scale, s, add);
    add_fragments<D>(dqkv + head + 2 * s.C, ld, key0 + r * kStrip, dv[r], 1.0f, s, add);
  }
}

// ---------------------------------------------------------------- dQ

// One key tile of the dQ kernel for the warp's R strips of 16 queries (strip r: queries query0 + 16 r ..), a step
// of keys at a time: S = Q K^T and dP = dO V^T, dS = P (dP - D), dQ += dS K (scaled once at the end). kMasked: a
// tile where some key lies past some query of the warp, or past T.
template <bool kMasked, typename E, int D, int R>
__device__ inline void query_grads_key_tile(float dq[R][D / 8][4], const E* q, const E* dO, const E* k, const E* v,
                                            int strip, int query0, int s0, const float row_lse[R][2],
                                            const float row_D[R][2], const Dims& s, float scale_log2) {
  constexpr int kStep = kQueryGradsStep<R>;
#pragma unroll 1
  for (int c0 = 0; c0 < kTile; c0 += kStep) {
    float p[R][kStep / 8][4], ds[R][kStep / 8][4];
    strips_times_tile_t<E, D, kStep, R, false>(p, q, strip, k, c0, 0);
    strips_times_tile_t<E, D, kStep, R, false>(ds, dO, strip, v, c0, 0);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int n = 0; n < kStep / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float prob = exp2f(fmaf(p[r][n][i], scale_log2, -row_lse[r][i / 2]));
          if (kMasked) {
            const int t = query0 + r * kStrip + frag_row(i), key = s0 + c0 + frag_col(n, i);
            if (key > t || t >= s.T) prob = 0.0f;
          }
          ds[r][n][i] = prob * (ds[r][n][i] - row_D[r][i / 2]);
        }
    strips_probs_times_tile<E, D, kStep, R>(dq, ds, k, c0);
  }
}

template <typename E, int D, int R>
__global__ void __launch_bounds__(kThreads, kQueryGradsBlocks<D, R>)
    flash_query_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                             int query_tiles, bool add) {
  constexpr int kRows = R * kTile;       // queries of the block's tile
  constexpr int kWarpRows = R * kStrip;  // queries of a warp
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kRows * kLdTile<D>);
  E* dO = pieces.take<E>(kRows * kLdTile<D>);
  const TilePair<E, D> k = take_pair<E, D>(pieces), v = take_pair<E, D>(pieces);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kRows;  // the longest tiles first
  const int strip = threadIdx.x / kWarpSize * kWarpRows;                    // the warp's first row in the tile
  const int query0 = t0 + strip, warp_last_query = query0 + kWarpRows - 1;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);
  const float scale_log2 = s.scale * kLog2e;
  const int last_key_tile = (min(t0 + kRows, s.T) - 1) / kTile;  // the block's diagonal

  // Batch 0: the block's Q and dO tiles and key tile 0.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    issue_tile<D>(q + r * kTile * kLdTile<D>, qkv + head, t0 + r * kTile, s, ld);
    issue_tile<D>(dO + r * kTile * kLdTile<D>, dout_head, t0 + r * kTile, s, s.C);
  }
  issue_tile<D>(k[0], qkv + head + s.C, 0, s, ld);
  issue_tile<D>(v[0], qkv + head + 2 * s.C, 0, s, ld);
  __pipeline_commit();
  float row_lse[R][2], row_D[R][2];  // rows g and g + 8 of each strip; lse in base 2
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int t = query0 + r * kStrip + frag_row(2 * g);
      row_lse[r][g] = t < s.T ? lse[static_cast<int64_t>(bh) * s.T + t] * kLog2e : 0.0f;
      row_D[r][g] = t < s.T ? D_rows[static_cast<int64_t>(bh) * s.T + t] : 0.0f;
    }
  float dq[R][D / 8][4] = {};

  for (int kt = 0; kt <= last_key_tile; ++kt) {
    const bool next = kt < last_key_tile;
    if (next) {
      issue_tile<D>(k[kt + 1], qkv + head + s.C, (kt + 1) * kTile, s, ld);
      issue_tile<D>(v[kt + 1], qkv + head + 2 * s.C, (kt + 1) * kTile, s, ld);
      __pipeline_commit();
    }
    wait_for_current_tile(next);
    __syncthreads();  // every thread's copies of tile kt have landed
    const int s0 = kt * kTile;
    if (s0 > warp_last_query) {
      // every key of the tile lies past every query of the warp (R > 1 only)
    } else if (s0 + kTile - 1 > query0 || s0 + kTile > s.T) {
      query_grads_key_tile<true, E, D, R>(dq, q, dO, k[kt], v[kt], strip, query0, s0, row_lse, row_D, s, scale_log2);
    } else {
      query_grads_key_tile<false, E, D, R>(dq, q, dO, k[kt], v[kt], strip, query0, s0, row_lse, row_D, s, scale_log2);
    }
    __syncthreads();  // every warp is done with tile kt's buffers
  }
#pragma unroll
  for (int r = 0; r < R; ++r) add_fragments<D>(dqkv + head, ld, query0 + r * kStrip, dq[r], s.scale, s, add);
}

// ---------------------------------------------------------------- launch

// The D pre-pass, then the dK/dV kernel (with two strips, in steps of kKeyStep queries) and the dQ kernel with R
// strips a warp (kBackwardStrips: 1 at head width 128), for qkv's 16-bit dtype and head size, queued on `stream`. Each
// element of dK and dV is stored by the one block of its key tile, each of dQ by its query tile's: with add = false
// (GradWrite::Overwrite), stored without reading dqkv. The caller has checked the shapes
// (ops::flash_attention_backward's rules).
template <int R, int kKeyStep = kQueryStep>
void launch_flash_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                           const Tensor& lse, const Dims& s, cudaStream_t stream, bool add) {
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    constexpr int D = decltype(width)::value;
    constexpr int kR = kBackwardStrips<D, R>;
    const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, stream);
    const auto launch = [&](const char* name, auto kernel, size_t bytes, int64_t query_tiles) {
      launch_tiles(name, kernel, tile_grid(qkv, s, kR * kTile), bytes, stream, static_cast<E*>(dqkv.raw()),
                   static_cast<const E*>(qkv.raw()), static_cast<const E*>(dout.raw()), lse.data<float>(),
                   D_rows.data<float>(), s, static_cast<int>(query_tiles), add);
    };
    // The dK/dV kernel streams query tiles of 64; the dQ kernel's blocks own query tiles of 64 R.
    constexpr int kStep = kR == 1 ? kQueryStep : kKeyStep;  // one strip keeps the default step
    const char* key_grads_name = kR == 1               ? "flash_key_grads_kernel"
                                 : kStep == kQueryStep ? "flash_key_grads_kernel_rows128"
                                                       : "flash_key_grads_kernel_rows128_short_steps";
    launch(key_grads_name, flash_key_grads_kernel<E, D, kR, kStep>, key_grads_shared_bytes<D, kR>(),
           ceil_div(s.T, kTile));
    launch(kR == 1 ? "flash_query_grads_kernel" : "flash_query_grads_kernel_rows128",
           flash_query_grads_kernel<E, D, kR>, query_grads_shared_bytes<D, kR>(), ceil_div(s.T, kR * kTile));
  });
}

}  // namespace lab::ops::cuda::flash
