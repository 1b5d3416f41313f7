// The register-fragment pieces of the mma.sync flash attention kernels (common/ops/cuda/flash_attention.cu, and
// chapter 9's attention lab v6, ch09_advanced/kernels/01_attention/flash_registers.cu): operand fragments loaded
// from shared tiles by ldmatrix, a warp's strip times a tile into f32 C fragments, C fragments (rounded to 16
// bits) times a tile, where a lane's fragment values sit in the strip, row maxima and sums over the 4 lanes of a
// row, and a strip of fragments added into a 16-bit tensor. warp_mma.cuh documents the fragment layouts.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/cuda/warp_mma.cuh"

namespace lab::ops::cuda::flash {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kKeyGroups = kTile / 8;  // n8 score tiles across a 64-wide tile
inline constexpr int kQueryStep = 32;         // queries per step of the dK/dV kernels

// The A fragment (16 x 16) at (row0, col0) of a row-major shared tile.
template <int D, typename E>
__device__ inline void load_a(uint32_t a[4], const E* tile, int row0, int col0) {
  const int lane = threadIdx.x % kWarpSize;
  mma::ldmatrix_x4(a, tile + (row0 + mma::a_row(lane)) * kLdTile<D> + col0 + mma::a_col(lane));
}
// The B fragments of two n8 tiles (b[0..1]: n0 .. n0+7, b[2..3]: n0+8 .. n0+15) for k0 .. k0+15, from a tile
// whose rows are n (times K^T: B[k][n] = K[n][k]).
template <int D, typename E>
__device__ inline void load_b_rows_n(uint32_t b[4], const E* tile, int n0, int k0) {
  const int lane = threadIdx.x % kWarpSize;
  mma::ldmatrix_x4(b, tile + (n0 + mma::bt_row(lane)) * kLdTile<D> + k0 + mma::bt_col(lane));
}
// The same from a tile whose rows are k (times V: B[k][n] = V[k][n]), transposed by ldmatrix.
template <int D, typename E>
__device__ inline void load_b_rows_k(uint32_t b[4], const E* tile, int k0, int n0) {
  const int lane = threadIdx.x % kWarpSize;
  mma::ldmatrix_x4_trans(b, tile + (k0 + mma::a_row(lane)) * kLdTile<D> + n0 + mma::a_col(lane));
}

// acc[16, N] = A B^T: A the 16 rows of a_tile from row0 ([16, D]), B rows col0 .. col0+N-1 of b_tile ([N, D]):
// S = Q K^T, dP = dO V^T and their transposes. n8 tiles before column first_live are skipped (masked for every
// row of the strip; left at zero).
template <typename E, int D, int N>
__device__ inline void strip_times_tile_t(float acc[N / 8][4], const E* a_tile, int row0, const E* b_tile, int col0,
                                          int first_live) {
#pragma unroll
  for (int n = 0; n < N / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    load_a<D>(a, a_tile, row0, kk * 16);
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      if (col0 + nn * 16 + 16 <= first_live) continue;
      uint32_t b[4];
      load_b_rows_n<D>(b, b_tile, col0 + nn * 16, kk * 16);
      mma::mma_accumulate<E>(acc[2 * nn], a, b);
      mma::mma_accumulate<E>(acc[2 * nn + 1], a, b + 2);
    }
  }
}

// acc[16, D] += P B: P [16, K] given as f32 C fragments (rounded to E here: two n8 tiles make one k16 A
// fragment), B rows k0 .. k0+K-1 of a [.., D] tile whose rows are k (O += P V, dV += P^T dO, dK += dS^T Q,
// dQ += dS K). k16 steps before row first_live are skipped (P is zero there).
template <typename E, int D, int K>
__device__ inline void probs_times_tile(float acc[D / 8][4], const float p[K / 8][4], const E* b_tile, int k0,
                                        int first_live) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    if (k0 + kk * 16 + 16 <= first_live) continue;
    const uint32_t a[4] = {mma::pack<E>(p[2 * kk][0], p[2 * kk][1]), mma::pack<E>(p[2 * kk][2], p[2 * kk][3]),
                           mma::pack<E>(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           mma::pack<E>(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int nn = 0; nn < D / 16; ++nn) {
      uint32_t b[4];
      load_b_rows_k<D>(b, b_tile, k0 + kk * 16, nn * 16);
      mma::mma_accumulate<E>(acc[2 * nn], a, b);
      mma::mma_accumulate<E>(acc[2 * nn + 1], a, b + 2);
    }
  }
}

// The same two products for R strips of 16 rows a warp (strip r: rows row0 + 16 r of a_tile; acc[r], p[r]), each
// B fragment loaded once for all R strips: the shared-memory bytes read a product fall from 256 to 256 / R, plus
// the strips' own A fragments where they come from shared memory. With kSkip, strip r skips the n16 (k16) groups
// whose 16 columns (rows of b_tile) all lie before live + 16 r, which may be negative (nothing skipped); a B
// fragment no strip needs is not loaded. R = 1 skips what the one-strip versions above skip with live.
template <typename E, int D, int N, int R, bool kSkip>
__device__ inline void strips_times_tile_t(float acc[R][N / 8][4], const E* a_tile, int row0, const E* b_tile, int col0,
                                           int live) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int n = 0; n < N / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][n][i] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (!kSkip || col0 + N > live + r * kStrip) load_a<D>(a[r], a_tile, row0 + r * kStrip, kk * 16);
#pragma unroll
    for (int nn = 0; nn < N / 16; ++nn) {
      if (kSkip && col0 + nn * 16 + 16 <= live) continue;
      uint32_t b[4];
      load_b_rows_n<D>(b, b_tile, col0 + nn * 16, kk * 16);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (kSkip && col0 + nn * 16 + 16 <= live + r * kStrip) continue;
        mma::mma_accumulate<E>(acc[r][2 * nn], a[r], b);
        mma::mma_accumulate<E>(acc[r][2 * nn + 1], a[r], b + 2);
      }
    }
  }
}

template <typename E, int D, int K, int R, bool kSkip = false>
__device__ inline void strips_probs_times_tile(float acc[R][D / 8][4], const float p[R][K / 8][4], const E* b_tile,
                                               int k0 = 0, int live = 0) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    if (kSkip && k0 + kk * 16 + 16 <= live) continue;
    uint32_t a[R][4];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      a[r][0] = mma::pack<E>(p[r][2 * kk][0], p[r][2 * kk][1]);
      a[r][1] = mma::pack<E>(p[r][2 * kk][2], p[r][2 * kk][3]);
      a[r][2] = mma::pack<E>(p[r][2 * kk + 1][0], p[r][2 * kk + 1][1]);
      a[r][3] = mma::pack<E>(p[r][2 * kk + 1][2], p[r][2 * kk + 1][3]);
    }
#pragma unroll
    for (int nn = 0; nn < D / 16; ++nn) {
      uint32_t b[4];
      load_b_rows_k<D>(b, b_tile, k0 + kk * 16, nn * 16);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (kSkip && k0 + kk * 16 + 16 <= live + r * kStrip) continue;
        mma::mma_accumulate<E>(acc[r][2 * nn], a[r], b);
        mma::mma_accumulate<E>(acc[r][2 * nn + 1], a[r], b + 2);
      }
    }
  }
}

// Where a lane's C-fragment values sit: register i of n8 tile n holds row g + 8 (i / 2), column 8 n + 2 t + i % 2.
__device__ inline int frag_row(int i) {
  return threadIdx.x % kWarpSize / 4 + (i / 2) * 8;
}
__device__ inline int frag_col(int n, int i) {
  return n * 8 + 2 * (threadIdx.x % 4) + i % 2;
}

// The 4 lanes that hold a row (same g) combine their values.
__device__ inline float row_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ inline float row_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// dst[row0 + r, c] += scale acc[r, c] for a strip of accumulators [16, D] (rows past T, columns past hs skipped),
// rounded to dst's type; with add = false, dst = scale acc[r, c], dst not read (GradWrite::Overwrite).
template <int D, typename E>
__device__ void add_fragments(E* head, int64_t ld, int row0, const float acc[D / 8][4], float scale, const Dims& s,
                              bool add = true) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + frag_row(i), c = frag_col(n, i);
      if (row < s.T && c < s.hs) {
        E& dst = head[row * ld + c];
        store(dst, add ? to_float(dst) + scale * acc[n][i] : scale * acc[n][i]);
      }
    }
}

}  // namespace lab::ops::cuda::flash
