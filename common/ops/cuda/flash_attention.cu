// CUDA flash attention (common/ops/flash_attention.h): bf16 and f16 inputs, products on tensor cores with f32
// accumulation, the softmax in f32, in the manner of FlashAttention-2. The CPU version (cpu/flash_attention.cpp)
// takes the same steps with the same 64 x 64 tiles.
//
// Every kernel runs 4 warps (128 threads) on one 64-row tile of one (batch, head); each warp owns 16 of the
// tile's rows from start to end. Shared memory holds only the 16-bit tiles that the warps share (Q, K, V, dO;
// rows padded by 8 elements, so that the 8 rows an ldmatrix reads fall in different banks) and, in the
// backward, the lse and D of a query tile. Everything a warp computes stays in its registers: the products are
// mma.sync m16n8k16 with operands loaded by ldmatrix (warp_mma.cuh), whose fragment layouts are documented, so
// each lane knows the (row, column) of every score it holds. Hence the causal mask per element, row maxima and
// sums over the 4 lanes that share a row (two shuffles), rows rescaled in place, and the f32 score fragments of
// two adjacent n8 tiles rounded and packed into the A fragment of the next product (P V, P^T dO, dS^T Q, dS K)
// without leaving registers. The softmax runs in base 2 (exp2 of scores times scale log2 e).
//
//   forward        one block per query tile; the warp's Q fragments loaded once; key tiles 0 .. the diagonal
//                  streamed through shared memory (tiles above it are entirely masked and never loaded; on the
//                  diagonal a warp skips the n8 tiles past its last query); S = Q K^T, online softmax with the
//                  row max and sum in registers, O += P V into register accumulators; writes O and the row
//                  log-sum-exp. Blocks are numbered so that the longest tiles (the last queries see every key)
//                  start first and the short ones fill in at the end of the grid, as FlashAttention-2 orders them.
//   D pre-pass     D = rowsum(dO * O), one warp per row.
//   dK, dV         one block per key tile; query tiles from the diagonal to the end streamed, 32 queries at a
//                  time (64 queries of f32 P^T and dS^T next to the dK and dV accumulators would not fit the
//                  registers at head size 128); S^T = K Q^T and dP^T = V dO^T, P^T recomputed from the saved
//                  log-sum-exp, dS^T = P^T (dP^T - D), dV += P^T dO and dK += dS^T Q (dO and Q as B operands
//                  by ldmatrix .trans).
//   dQ             one block per query tile, key tiles 0 .. the diagonal: S, P, dP and dS again, dQ += dS K.
// dQ by a separate pass, not by atomics from the dK/dV blocks: the dK/dV blocks would have to add into an f32
// copy of dQ (16-bit atomics round at every add) that then needs its own conversion pass anyway, and the result
// would depend on the order in which blocks arrive. The separate pass recomputes S and dP (7 tile products per
// tile pair instead of 5, 40% more backward math), but is deterministic, needs no [B,T,C] f32 workspace, and
// adds into dqkv in its own dtype as the dK/dV pass does. (FlashAttention-2 uses atomics; chapter 9's attention
// lab has that version too, v5, to measure the two side by side.)
//
// Resources at sm_90 (nvcc 13 -O3, ptxas -v / cuobjdump -res-usage; no spills, no local memory), registers per
// thread and dynamic shared memory per block of 128 threads, head size 64 | 128:
//   forward       167 | 218 registers, 27 | 51 KiB
//   dK, dV        164 | 254 registers, 36.5 | 68.5 KiB
//   dQ            166 | 222 registers, 36.5 | 68.5 KiB
// Registers are the limit: 3 blocks (12 warps) per SM at head size 64, 2 at 128, which is what each kernel's
// __launch_bounds__ asks ptxas for (asking for more made it spill). On one H200 (chapter 9's attention lab, GPT-2
// d12 shape B = 8, T = 1024, bf16; `ch09_attention_lab [--pass backward] --version 3,4,5,6 --repeats 5`, medians)
// the forward takes 0.117 ms and the backward 0.382 ms, against 0.476 and 2.39 ms
// for the WMMA kernels that keep every product in shared memory (the lab's v4, which this file replaced).
//
// f32 inputs: not flash attention. They take the materialised path of attention.h (cuBLAS in the math mode of
// common/cuda/cublas.h) with the T x T probabilities in a workspace for the duration of the call; the
// log-sum-exp is recovered from the probabilities (below), and the backward recomputes them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/core/memory.h"
#include "common/ops/attention.h"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/cuda/warp_mma.cuh"
#include "common/ops/flash_attention.h"

namespace lab::ops::cuda {

namespace {

using namespace flash;  // tile geometry, Dims, the D pre-pass, launch helpers (flash_attention_tiles.cuh)

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kKeyGroups = kTile / 8;  // n8 score tiles across a 64-wide tile
constexpr int kQueryStep = 32;         // queries per step of the dK/dV kernel

// Blocks per SM each kernel is compiled for (__launch_bounds__): ptxas caps the registers at 64K / (128 x this).
// Chosen so that none spills at sm_90 (see the resource report at the top of the file). Unused where
// __launch_bounds__ means nothing (the emulation build).
template <int D>
[[maybe_unused]] constexpr int kForwardBlocks = D == 64 ? 3 : 2;
template <int D>
[[maybe_unused]] constexpr int kKeyGradsBlocks = D == 64 ? 3 : 2;
template <int D>
[[maybe_unused]] constexpr int kQueryGradsBlocks = D == 64 ? 3 : 2;

// Forward: the Q, K and V tiles. dK/dV and dQ: Q, K, V and dO tiles, and the lse and D of a query tile.
template <int D>
constexpr size_t forward_shared_bytes() {
  return 3 * piece_bytes<uint16_t>(kTile * kLdTile<D>);
}
template <int D>
constexpr size_t backward_shared_bytes() {
  return 4 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + 2 * piece_bytes<float>(kTile);
}

// ---------------------------------------------------------------- tiles and fragments

// Rows [first_row, first_row + 64) of one head into a [64, D] tile of shared memory, 16 bytes per thread and
// step when the head fills the tile's width and sits 16-byte aligned (the GPT-2 case); otherwise element by
// element with zero padding (load_tile). All threads.
template <int D, typename E>
__device__ void load_tile_fast(E* tile, const E* head, int first_row, const Dims& s, int64_t ld) {
  struct alignas(16) Chunk {  // 16 bytes of E, copied whole
    E e[16 / sizeof(E)];
  };
  constexpr int kPerRow = D * static_cast<int>(sizeof(E)) / 16;
  const bool aligned = reinterpret_cast<uintptr_t>(head) % 16 == 0 && ld % 8 == 0;
  if (s.hs != D || !aligned) return load_tile<D>(tile, head, first_row, s, ld);
  for (int i = threadIdx.x; i < kTile * kPerRow; i += kThreads) {
    const int r = i / kPerRow, c = (i % kPerRow) * 8, row = first_row + r;
    Chunk v{};
    if (row < s.T) v = *reinterpret_cast<const Chunk*>(head + row * ld + c);
    *reinterpret_cast<Chunk*>(tile + r * kLdTile<D> + c) = v;
  }
}

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
// rounded to dst's type.
template <int D, typename E>
__device__ void add_fragments(E* head, int64_t ld, int row0, const float acc[D / 8][4], float scale, const Dims& s) {
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row0 + frag_row(i), c = frag_col(n, i);
      if (row < s.T && c < s.hs) {
        E& dst = head[row * ld + c];
        store(dst, to_float(dst) + scale * acc[n][i]);
      }
    }
}

// ---------------------------------------------------------------- forward

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kForwardBlocks<D>)
    flash_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kTile;  // the longest tiles first
  const int strip = threadIdx.x / kWarpSize * kStrip;                       // the warp's first row in the tile
  const int64_t ld = s.ld_qkv();
  const E* q_head = qkv + s.head_offset(b, h, ld);
  const float scale_log2 = s.scale * kLog2e;  // scores in base 2: exp(x) = exp2(x log2 e)

  load_tile_fast<D>(q, q_head, t0, s, ld);
  __syncthreads();
  uint32_t q_frag[D / 16][4];  // the warp's 16 queries, loaded once
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a<D>(q_frag[kk], q, strip, kk * 16);

  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8: running max (base 2), sum
  const int last_key_tile = (min(t0 + kTile, s.T) - 1) / kTile;
  for (int kt = 0; kt <= last_key_tile; ++kt) {
    const int s0 = kt * kTile;
    __syncthreads();  // every warp is done with the previous K and V
    load_tile_fast<D>(k, q_head + s.C, s0, s, ld);
    load_tile_fast<D>(v, q_head + 2 * s.C, s0, s, ld);
    __syncthreads();

    // S = Q K^T for the warp's 16 queries and the tile's 64 keys, in registers. On the diagonal, keys past the
    // strip's last query are masked for all its rows: their n8 tiles are skipped (left at zero, masked below).
    float sc[kKeyGroups][4];
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) sc[n][i] = 0.0f;
    const int live_keys = t0 + strip + kStrip - s0;  // keys of this tile that some row of the strip sees
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nn = 0; nn < kTile / 16; ++nn) {
        if (nn * 16 >= live_keys) continue;
        uint32_t bk[4];
        load_b_rows_n<D>(bk, k, nn * 16, kk * 16);
        mma::mma_accumulate<E>(sc[2 * nn], q_frag[kk], bk);
        mma::mma_accumulate<E>(sc[2 * nn + 1], q_frag[kk], bk + 2);
      }

    // Online softmax: mask, the rows' new max, rescale what was summed under the old one, P = exp2(S - max).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int query = t0 + strip + frag_row(i), key = s0 + frag_col(n, i);
        sc[n][i] = key <= query && key < s.T ? sc[n][i] * scale_log2 : -INFINITY;
        tile_max[i / 2] = fmaxf(tile_max[i / 2], sc[n][i]);
      }
    float rescale[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float new_max = fmaxf(m[r], row_max(tile_max[r]));
      base[r] = new_max == -INFINITY ? 0.0f : new_max;  // a row that has seen no key yet stays at zero
      rescale[r] = exp2f(m[r] - base[r]);               // 0 while m is -inf
      m[r] = new_max;
      l[r] *= rescale[r];  // each lane sums its own columns; the 4 lanes of a row are added at the end
    }
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        sc[n][i] = exp2f(sc[n][i] - base[i / 2]);
        l[i / 2] += sc[n][i];
      }
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[n][i] *= rescale[i / 2];

    // O += P V, P from the score registers.
    probs_times_tile<E, D, kTile>(o, sc, v, 0, 0);
  }

  const int lane = threadIdx.x % kWarpSize;
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = row_sum(l[r]);
    inv_l[r] = 1.0f / total;
    const int t = t0 + strip + frag_row(2 * r);
    if (lane % 4 == 0 && t < s.T) lse[static_cast<int64_t>(bh) * s.T + t] = (m[r] + log2f(total)) * kLn2;
  }
  E* out_head = out + s.head_offset(b, h, s.C);
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = t0 + strip + frag_row(i), c = frag_col(n, i);
      if (t < s.T && c < s.hs) store(out_head[static_cast<int64_t>(t) * s.C + c], o[n][i] * inv_l[i / 2]);
    }
}

// ---------------------------------------------------------------- backward: dK, dV

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kKeyGradsBlocks<D>)
    flash_key_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                           int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* dO = pieces.take<E>(kTile * kLdTile<D>);
  float* tile_lse = pieces.take<float>(kTile);  // base 2
  float* tile_D = pieces.take<float>(kTile);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int s0 = static_cast<int>(blockIdx.y) * kTile;  // the first key tiles see the most queries: they start first
  const int strip = threadIdx.x / kWarpSize * kStrip;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);
  const float scale_log2 = s.scale * kLog2e;

  load_tile_fast<D>(k, qkv + head + s.C, s0, s, ld);
  load_tile_fast<D>(v, qkv + head + 2 * s.C, s0, s, ld);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};

  // Query tiles from the diagonal (earlier queries see none of these keys) to the last.
  for (int qt = s0 / kTile; qt < query_tiles; ++qt) {
    const int t0 = qt * kTile;
    __syncthreads();  // every warp is done with the previous Q, dO, lse and D
    load_tile_fast<D>(q, qkv + head, t0, s, ld);
    load_tile_fast<D>(dO, dout_head, t0, s, s.C);
    load_query_rows(tile_lse, tile_D, lse, D_rows, bh, t0, s, kLog2e);
    __syncthreads();
    // On the diagonal, queries before the strip's first key see none of its keys.
    const int first_live = t0 == s0 ? strip : 0;

    // In steps of kQueryStep queries (32: the f32 fragments of P^T and dS^T for 64 queries, next to dK and dV,
    // would not fit the registers at head size 128). S^T = K Q^T for the warp's 16 keys; P^T = exp(scale S^T -
    // lse) where the query sees the key; dV += P^T dO; dP^T = V dO^T; dS^T = P^T (dP^T - D); dK += dS^T Q
    // (scaled once at the end).
#pragma unroll 1
    for (int c0 = 0; c0 < kTile; c0 += kQueryStep) {
      if (c0 + kQueryStep <= first_live) continue;
      float p[kQueryStep / 8][4];
      strip_times_tile_t<E, D, kQueryStep>(p, k, strip, q, c0, first_live);
#pragma unroll
      for (int n = 0; n < kQueryStep / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = s0 + strip + frag_row(i), c = c0 + frag_col(n, i), query = t0 + c;
          p[n][i] = query >= key && query < s.T ? exp2f(p[n][i] * scale_log2 - tile_lse[c]) : 0.0f;
        }
      probs_times_tile<E, D, kQueryStep>(dv, p, dO, c0, first_live);

      float ds[kQueryStep / 8][4];
      strip_times_tile_t<E, D, kQueryStep>(ds, v, strip, dO, c0, first_live);
#pragma unroll
      for (int n = 0; n < kQueryStep / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) ds[n][i] = p[n][i] * (ds[n][i] - tile_D[c0 + frag_col(n, i)]);
      probs_times_tile<E, D, kQueryStep>(dk, ds, q, c0, first_live);
    }
  }
  add_fragments<D>(dqkv + head + s.C, ld, s0 + strip, dk, s.scale, s);
  add_fragments<D>(dqkv + head + 2 * s.C, ld, s0 + strip, dv, 1.0f, s);
}

// ---------------------------------------------------------------- backward: dQ

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kQueryGradsBlocks<D>)
    flash_query_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                             int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* dO = pieces.take<E>(kTile * kLdTile<D>);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kTile;  // the longest tiles first
  const int strip = threadIdx.x / kWarpSize * kStrip;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const float scale_log2 = s.scale * kLog2e;
  float row_lse[2], row_D[2];  // rows g and g + 8 of the strip; lse in base 2
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int t = t0 + strip + frag_row(2 * r);
    row_lse[r] = t < s.T ? lse[static_cast<int64_t>(bh) * s.T + t] * kLog2e : 0.0f;
    row_D[r] = t < s.T ? D_rows[static_cast<int64_t>(bh) * s.T + t] : 0.0f;
  }

  load_tile_fast<D>(q, qkv + head, t0, s, ld);
  load_tile_fast<D>(dO, dout + s.head_offset(b, h, s.C), t0, s, s.C);
  float dq[D / 8][4] = {};

  const int last_key_tile = (min(t0 + kTile, s.T) - 1) / kTile;
  for (int kt = 0; kt <= last_key_tile; ++kt) {
    const int s0 = kt * kTile;
    __syncthreads();  // every warp is done with the previous K and V
    load_tile_fast<D>(k, qkv + head + s.C, s0, s, ld);
    load_tile_fast<D>(v, qkv + head + 2 * s.C, s0, s, ld);
    __syncthreads();

    // S = Q K^T and dP = dO V^T for the warp's 16 queries and the tile's 64 keys; dS = P (dP - D).
    float p[kKeyGroups][4], ds[kKeyGroups][4];
    strip_times_tile_t<E, D, kTile>(p, q, strip, k, 0, 0);
    strip_times_tile_t<E, D, kTile>(ds, dO, strip, v, 0, 0);
#pragma unroll
    for (int n = 0; n < kKeyGroups; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int t = t0 + strip + frag_row(i), key = s0 + frag_col(n, i);
        const float prob = key <= t && t < s.T ? exp2f(p[n][i] * scale_log2 - row_lse[i / 2]) : 0.0f;
        ds[n][i] = prob * (ds[n][i] - row_D[i / 2]);
      }
    // dQ += dS K (scaled once at the end)
    probs_times_tile<E, D, kTile>(dq, ds, k, 0, 0);
  }
  add_fragments<D>(dqkv + head, ld, t0 + strip, dq, s.scale, s);
}

// ---------------------------------------------------------------- f32: the materialised fallback

// lse of row (b, h, t) from its probabilities: p_s = exp(scale q_t.k_s - lse) for every s, so
// lse = scale q_t.k_s - log p_s. Taken at the row's largest probability (at least 1/(t+1), never underflowed).
// One warp per row.
__global__ void lse_from_probabilities_kernel(float* lse, const float* att, const float* qkv, int64_t rows, Dims s) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t bh = r / s.T;
  const int t = static_cast<int>(r % s.T), b = static_cast<int>(bh / s.NH), h = static_cast<int>(bh % s.NH);
  const float* row = att + r * s.T;
  float best = -1.0f;
  int best_key = 0;
  for (int key = lane; key <= t; key += kWarpSize)
    if (row[key] > best) best = row[key], best_key = key;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, best, offset);
    const int other_key = __shfl_xor_sync(kFullMask, best_key, offset);
    if (other > best || (other == best && other_key < best_key)) best = other, best_key = other_key;
  }
  const int64_t ld = 3 * static_cast<int64_t>(s.C);
  const float* q = qkv + static_cast<int64_t>(b) * s.T * ld + static_cast<int64_t>(t) * ld + h * s.hs;
  const float* k = qkv + static_cast<int64_t>(b) * s.T * ld + static_cast<int64_t>(best_key) * ld + s.C + h * s.hs;
  float dot = 0.0f;
  for (int c = lane; c < s.hs; c += kWarpSize) dot += q[c] * k[c];
  dot = warp_sum(dot);
  if (lane == 0) lse[r] = s.scale * dot - logf(best);
}

Tensor probabilities_workspace(const Tensor& qkv, int n_head) {
  const MemoryScope scope(MemCategory::Workspace);
  return Tensor::empty({qkv.dim(0), n_head, qkv.dim(1), qkv.dim(1)}, DType::F32, qkv.device());
}

// ---------------------------------------------------------------- launchers

template <typename E, int D>
void forward_tiles(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Dims& s, cudaStream_t stream) {
  const dim3 grid = tile_grid(qkv, s);
  launch_tiles("flash_forward_kernel", flash_forward_kernel<E, D>, grid, forward_shared_bytes<D>(), stream,
               static_cast<E*>(out.raw()), lse.data<float>(), static_cast<const E*>(qkv.raw()), s,
               static_cast<int>(grid.y));
}

template <typename E, int D>
void backward_tiles(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& lse, const Tensor& D_rows,
                    const Dims& s, cudaStream_t stream) {
  const dim3 grid = tile_grid(qkv, s);
  const int query_tiles = static_cast<int>(grid.y);
  launch_tiles("flash_key_grads_kernel", flash_key_grads_kernel<E, D>, grid, backward_shared_bytes<D>(), stream,
               static_cast<E*>(dqkv.raw()), static_cast<const E*>(qkv.raw()), static_cast<const E*>(dout.raw()),
               lse.data<float>(), D_rows.data<float>(), s, query_tiles);
  launch_tiles("flash_query_grads_kernel", flash_query_grads_kernel<E, D>, grid, backward_shared_bytes<D>(), stream,
               static_cast<E*>(dqkv.raw()), static_cast<const E*>(qkv.raw()), static_cast<const E*>(dout.raw()),
               lse.data<float>(), D_rows.data<float>(), s, query_tiles);
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  LaunchScope scope(qkv);
  if (qkv.dtype() == DType::F32) {  // the materialised fallback (see the top of the file)
    const Tensor att = probabilities_workspace(qkv, n_head);
    attention_forward(out, att, qkv, n_head);
    const int64_t rows = lse.numel();
    LAB_LAUNCH(lse_from_probabilities_kernel, {grid_for(rows, kWarpRowsPerBlock), kBlockSize, 0, scope.stream()},
               lse.data<float>(), att.data<float>(), qkv.data<float>(), rows, s);
    return;
  }
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    forward_tiles<decltype(element), decltype(width)::value>(out, lse, qkv, s, scope.stream());
  });
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  LaunchScope scope(qkv);
  if (qkv.dtype() == DType::F32) {  // the materialised fallback: recompute the probabilities, then its backward
    const Tensor att = probabilities_workspace(qkv, n_head);
    const MemoryScope workspace(MemCategory::Workspace);
    attention_forward(Tensor::empty(out.shape(), DType::F32, out.device()), att, qkv, n_head);
    attention_backward(dqkv, dout, qkv, att, n_head);
    return;
  }
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, scope.stream());
    backward_tiles<E, decltype(width)::value>(dqkv, dout, qkv, lse, D_rows, s, scope.stream());
  });
}

}  // namespace lab::ops::cuda
