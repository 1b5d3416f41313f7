// v6 of the attention lab: flash attention with mma.sync fragments in registers (FlashAttention-2's layout), as
// the core's op ran it before v7 (common/ops/cuda/flash_attention.cu says what v7 changes): every tile loaded with
// 16-byte loads through registers and waited for at a barrier before it is multiplied, and the causal mask
// applied to every tile. The kernels, passes and fragments are otherwise v7's; flash_attention_fragments.cuh
// holds the pieces the two share.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"

namespace lab::ch09::attention_lab {

namespace {

using namespace ops::cuda::flash;  // tiles, fragments, Dims, the D pre-pass, launch helpers
namespace mma = ops::cuda::mma;
using ops::cuda::kWarpSize;

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

// ---------------------------------------------------------------- forward

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kForwardBlocks<D>)
    flash_registers_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
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
    flash_registers_key_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows,
                                     Dims s, int query_tiles) {
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
    flash_registers_query_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows,
                                       Dims s, int query_tiles) {
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

// ---------------------------------------------------------------- launchers

}  // namespace

void flash_registers_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    constexpr int D = decltype(width)::value;
    launch_forward_tiles<E>("flash_registers_forward_kernel", flash_registers_forward_kernel<E, D>,
                            forward_shared_bytes<D>(), out, lse, qkv, s, scope.stream());
  });
}

void flash_registers_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, scope.stream());
    constexpr int D = decltype(width)::value;
    launch_backward_tiles<E>("flash_registers_key_grads_kernel", flash_registers_key_grads_kernel<E, D>,
                             backward_shared_bytes<D>(), dqkv, dout, qkv, lse, D_rows, s, scope.stream());
    launch_backward_tiles<E>("flash_registers_query_grads_kernel", flash_registers_query_grads_kernel<E, D>,
                             backward_shared_bytes<D>(), dqkv, dout, qkv, lse, D_rows, s, scope.stream());
  });
}

}  // namespace lab::ch09::attention_lab
