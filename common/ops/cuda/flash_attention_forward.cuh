// The forward kernel of the register flash attention (common/ops/cuda/flash_attention.cu says how the kernels
// work), for query tiles of kWarps x R strips of 16 queries: each warp owns R strips from start to end.
//
//   R = 1   64-query tiles: the core's op (v7 of chapter 9's attention lab).
//   R = 2   128-query tiles, 32 queries a warp, as FlashAttention-2 takes them at head size 64: the lab's v11.
//
// What R changes. Each K or V fragment that a warp loads from shared memory (one ldmatrix.x4: two n8 tiles of a
// k16 step) feeds 2 R mma.sync instead of 2, so the shared-memory bytes read per tensor-core product fall from 256
// to 256 / R; and one K/V tile copied into shared memory serves 64 R queries instead of 64, so a head's keys and
// values are read from L2 T / (64 R) times instead of T / 64. The price: R times the registers of the scores and
// the running outputs, so fewer warps per SM to hide latency, and a coarser grid (the causal triangle cut into half
// as many, twice as long, tiles). At sm_90 (nvcc 13 -O3, ptxas -v), head size 64: R = 1 takes 159 registers a
// thread, 3 blocks (12 warps) per SM; R = 2 with the Q fragments kept in registers took 255 and spilled, so at
// R = 2 they are read from shared memory at each key tile (8 ldmatrix more to a tile's 32, still 160 bytes of
// shared memory a product instead of 256): 245 registers, no spills, 2 blocks (8 warps) per SM, 54 KiB of shared
// memory a block. At head size 128 R = 2 would need more than the 255 registers a thread can have: the launcher
// takes R = 1 there (212 registers).
//
// The causal mask with R strips: a warp walks the block's key tiles 0 .. the block's diagonal; a tile whose keys
// all lie past the warp's last query is skipped (R = 2: the upper half of the block's 128 queries has one key tile
// more than the lower), one that every query of the warp sees whole runs without the mask's arithmetic, the others
// with it, and on those the n16 key groups past a strip's last query are not multiplied for that strip. Per query,
// the key tiles, the products and the softmax's steps are those of R = 1, in the same order: the two give the same
// bits (test_ch09_flash_attention_cuda checks it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_pipeline.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"

namespace lab::ops::cuda::flash {

// Strips a warp can own at head width D: 2 only at 64 (see the top of the file).
template <int D, int R>
inline constexpr int kForwardStrips = D == 64 ? R : 1;

// Blocks per SM the forward is compiled for (__launch_bounds__): ptxas caps the registers at 64K / (128 x this).
// Chosen so that none spills at sm_90. Unused where __launch_bounds__ means nothing (the emulation build).
template <int D, int R>
[[maybe_unused]] inline constexpr int kForwardBlocks = D == 64 && R == 1 ? 3 : 2;

// Whether a warp keeps its Q fragments in registers from start to end (R = 1), or reads them from the Q tile in
// shared memory at each key tile (R = 2: 32 more registers would make ptxas spill; the reads add 8 ldmatrix to the
// 32 of a key tile's K and V fragments).
template <int R>
inline constexpr bool kQInRegisters = R == 1;

// Shared memory: the Q tile (R x 64 rows) and two buffers each of K and V, in [64, D] 16-bit tiles.
template <int D, int R>
constexpr size_t forward_shared_bytes() {
  return (R + 4) * piece_bytes<uint16_t>(kTile * kLdTile<D>);
}

// One key tile's step of the online softmax, on the raw scores of the warp's R strips of 16 queries (strip r:
// queries query0 + 16 r ..; the scale is positive, so it keeps their order): with kMasked, keys past a query or past
// T set to -inf; the rows' new max, the rescale of the running sum summed under the old one (and in `rescale`, the
// factor the running output needs), and P = exp2(scale log2e S - scale log2e max) as one FMA and exp2, left in sc.
template <bool kMasked, int R>
__device__ inline void softmax_scores(float sc[R][kKeyGroups][4], float rescale[R][2], float m[R][2], float l[R][2],
                                      int query0, int s0, const Dims& s, float scale_log2) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (kMasked) {
          const int query = query0 + r * kStrip + frag_row(i), key = s0 + frag_col(n, i);
          if (key > query || key >= s.T) sc[r][n][i] = -INFINITY;
        }
        tile_max[i / 2] = fmaxf(tile_max[i / 2], sc[r][n][i]);
      }
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g and g + 8 of the strip
      const float new_max = fmaxf(m[r][h], row_max(tile_max[h]));
      base[h] = new_max == -INFINITY ? 0.0f : new_max * scale_log2;  // a row that has seen no key yet stays at zero
      rescale[r][h] = exp2f(m[r][h] * scale_log2 - base[h]);         // 0 while m is -inf
      m[r][h] = new_max;
      l[r][h] *= rescale[r][h];  // each lane sums its own columns; the 4 lanes of a row are added at the end
    }
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sc[r][n][i] = exp2f(fmaf(sc[r][n][i], scale_log2, -base[i / 2]));
        l[r][i / 2] += sc[r][n][i];
      }
  }
}

// The running outputs of the R strips, rescaled by softmax_scores' factors.
template <int D, int R>
__device__ inline void rescale_outputs(float o[R][D / 8][4], const float rescale[R][2]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[r][n][i] *= rescale[r][i / 2];
}

// Both at once: the step as the core's forward and the attention lab's v14 (on wgmma) take it. The lab's v15 keeps
// them apart, to rescale the output only once the product still adding into it is done.
template <bool kMasked, int D, int R>
__device__ inline void online_softmax(float sc[R][kKeyGroups][4], float o[R][D / 8][4], float m[R][2], float l[R][2],
                                      int query0, int s0, const Dims& s, float scale_log2) {
  float rescale[R][2];
  softmax_scores<kMasked, R>(sc, rescale, m, l, query0, s0, s, scale_log2);
  rescale_outputs<D, R>(o, rescale);
}

// One key tile of the forward for the warp's R strips of 16 queries (strip r: queries query0 + 16 r ..): S = Q K^T,
// the online softmax, O += P V. kMasked: a tile where some key lies past some query of the warp (or past T); a
// tile that every query of the warp sees whole skips the mask's index arithmetic.
template <bool kMasked, typename E, int D, int R>
__device__ inline void forward_key_tile(float o[R][D / 8][4], float m[R][2], float l[R][2],
                                        const uint32_t q_frag[R][D / 16][4], const E* q, int strip, const E* k,
                                        const E* v, int query0, int s0, const Dims& s, float scale_log2) {
  // S = Q K^T in registers. Where masked, the n16 key groups past a strip's last query are skipped for that strip
  // (left at zero, masked below), and not loaded where they are past every strip's.
  float sc[R][kKeyGroups][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) sc[r][n][i] = 0.0f;
  const int live_keys = query0 + kStrip - s0;  // keys of the tile some row of strip 0 sees; strip r sees 16 r more
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t qa[R][4];  // the strips' Q fragments of this k16 step: kept in registers, or read again (kQInRegisters)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (kQInRegisters<R>) {
#pragma unroll
        for (int j = 0; j < 4; ++j) qa[r][j] = q_frag[r][kk][j];
      } else {
        load_a<D>(qa[r], q, strip + r * kStrip, kk * 16);
      }
    }
#pragma unroll
    for (int nn = 0; nn < kTile / 16; ++nn) {
      if (kMasked && nn * 16 >= live_keys + (R - 1) * kStrip) continue;
      uint32_t bk[4];
      load_b_rows_n<D>(bk, k, nn * 16, kk * 16);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (kMasked && nn * 16 >= live_keys + r * kStrip) continue;
        mma::mma_accumulate<E>(sc[r][2 * nn], qa[r], bk);
        mma::mma_accumulate<E>(sc[r][2 * nn + 1], qa[r], bk + 2);
      }
    }
  }

  online_softmax<kMasked, D, R>(sc, o, m, l, query0, s0, s, scale_log2);

  // O += P V, P from the score registers.
  strips_probs_times_tile<E, D, kTile, R>(o, sc, v);
}

template <typename E, int D, int R>
__global__ void __launch_bounds__(kThreads, kForwardBlocks<D, R>)
    flash_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
  constexpr int kRows = R * kTile;       // queries of the block's tile
  constexpr int kWarpRows = R * kStrip;  // queries of a warp
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kRows * kLdTile<D>);
  const TilePair<E, D> k = take_pair<E, D>(pieces), v = take_pair<E, D>(pieces);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kRows;  // the longest tiles first
  const int strip = threadIdx.x / kWarpSize * kWarpRows;                    // the warp's first row in the tile
  const int query0 = t0 + strip, warp_last_query = query0 + kWarpRows - 1;
  const int64_t ld = s.ld_qkv();
  const E* q_head = qkv + s.head_offset(b, h, ld);
  const float scale_log2 = s.scale * kLog2e;                     // scores in base 2: exp(x) = exp2(x log2 e)
  const int last_key_tile = (min(t0 + kRows, s.T) - 1) / kTile;  // the block's diagonal

  // Batch 0: the Q tile; batch 1: key tile 0. Q's fragments are loaded while key tile 0 is still on its way.
#pragma unroll
  for (int r = 0; r < R; ++r) issue_tile<D>(q + r * kTile * kLdTile<D>, q_head, t0 + r * kTile, s, ld);
  __pipeline_commit();
  issue_tile<D>(k[0], q_head + s.C, 0, s, ld);
  issue_tile<D>(v[0], q_head + 2 * s.C, 0, s, ld);
  __pipeline_commit();
  __pipeline_wait_prior(1);
  __syncthreads();
  uint32_t q_frag[R][D / 16][4];  // the warp's queries, loaded once where they stay in registers
  if constexpr (kQInRegisters<R>) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) load_a<D>(q_frag[r][kk], q, strip + r * kStrip, kk * 16);
  }

  float o[R][D / 8][4] = {};
  float m[R][2], l[R][2];  // rows g and g + 8 of each strip: running raw max, sum
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      m[r][g] = -INFINITY;
      l[r][g] = 0.0f;
    }
  for (int kt = 0; kt <= last_key_tile; ++kt) {
    // Key tile kt + 1 is copied while tile kt is multiplied. Its buffers were last read at tile kt - 1, which
    // every warp finished before the barrier at the end of that iteration.
    const bool next = kt < last_key_tile;
    if (next) {
      issue_tile<D>(k[kt + 1], q_head + s.C, (kt + 1) * kTile, s, ld);
      issue_tile<D>(v[kt + 1], q_head + 2 * s.C, (kt + 1) * kTile, s, ld);
      __pipeline_commit();
    }
    wait_for_current_tile(next);
    __syncthreads();  // every thread's copies of tile kt have landed
    const int s0 = kt * kTile;
    if (s0 > warp_last_query) {
      // every key of the tile lies past every query of the warp (R > 1 only)
    } else if (s0 + kTile - 1 > query0 || s0 + kTile > s.T) {
      forward_key_tile<true, E, D, R>(o, m, l, q_frag, q, strip, k[kt], v[kt], query0, s0, s, scale_log2);
    } else {
      forward_key_tile<false, E, D, R>(o, m, l, q_frag, q, strip, k[kt], v[kt], query0, s0, s, scale_log2);
    }
    __syncthreads();  // every warp is done with tile kt's buffers
  }

  const int lane = threadIdx.x % kWarpSize;
  E* out_head = out + s.head_offset(b, h, s.C);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float inv_l[2];
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const float total = row_sum(l[r][g]);
      inv_l[g] = 1.0f / total;
      const int t = query0 + r * kStrip + frag_row(2 * g);
      if (lane % 4 == 0 && t < s.T)
        lse[static_cast<int64_t>(bh) * s.T + t] = (m[r][g] * scale_log2 + log2f(total)) * kLn2;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int t = query0 + r * kStrip + frag_row(i), c = frag_col(n, i);
        if (t < s.T && c < s.hs) store(out_head[static_cast<int64_t>(t) * s.C + c], o[r][n][i] * inv_l[i / 2]);
      }
  }
}

// The forward with R strips a warp (kForwardStrips: 1 at head width 128) for qkv's 16-bit dtype and head size,
// queued on `stream`. The caller has checked the shapes (ops::flash_attention_forward's rules).
template <int R>
void launch_flash_forward(const char* name, const Tensor& out, const Tensor& lse, const Tensor& qkv, const Dims& s,
                          cudaStream_t stream) {
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    constexpr int D = decltype(width)::value;
    constexpr int kR = kForwardStrips<D, R>;
    launch_forward_tiles<E>(name, flash_forward_kernel<E, D, kR>, forward_shared_bytes<D, kR>(), out, lse, qkv, s,
                            stream, kR * kTile);
  });
}

}  // namespace lab::ops::cuda::flash
