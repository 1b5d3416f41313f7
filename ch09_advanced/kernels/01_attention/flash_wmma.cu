// v4 of the attention lab: flash attention on tensor cores through WMMA, with every product going through shared
// memory (see flash_versions.h). It was the core's op until v6 (common/ops/cuda/flash_attention.cu) replaced it.
//
// Every kernel runs 4 warps (128 threads) on one 64-row tile of one (batch, head); each warp owns 16 of the
// tile's rows from start to end, so after a tile of keys (or queries) has been loaded into shared memory by the
// whole block, a warp computes its strip of scores, its softmax and its products alone, meeting the other
// warps only at the barriers around the next load. Within a warp, lanes 2r and 2r+1 share row r of the strip:
// each takes half of its columns, and one shuffle combines their row maxima and sums.
//
// Shared memory holds the 16-bit tiles (rows padded by 8 elements: WMMA wants leading dimensions in multiples
// of 16 bytes, and the padding also moves consecutive rows to other banks), f32 scores, and the f32 running
// outputs: an accumulator fragment's lane layout is unspecified (flash_attention_mma.cuh), so rows are rescaled
// in shared memory, not in fragments. 110 KiB (head size 128) or 70 KiB (64) for the forward, 187 or 123 KiB
// for the dK/dV kernel: measured on an H200 (GPT-2 124M, B = 8, T = 1024), this caps the forward at 3 blocks
// and the dK/dV kernel at 1 block per SM, and every score makes a round trip through shared memory: about 27
// TFLOP/s forward and 13 backward. v6 keeps the scores, probabilities and accumulators in registers instead.
//
//   forward        one block per query tile; key tiles 0 .. the diagonal streamed through shared memory
//                  (tiles above the diagonal are entirely masked and never loaded); online softmax with the
//                  row max and sum in registers; writes O and the row log-sum-exp. Blocks are numbered so that
//                  the longest tiles (the last queries see every key) start first.
//   D pre-pass     D = rowsum(dO * O), one warp per row (flash_attention_tiles.cuh).
//   dK, dV         one block per key tile; query tiles from the diagonal to the end streamed; each warp
//                  computes its 16 keys' strip of S^T = K Q^T and dP^T = V dO^T, recomputes P^T from the saved
//                  log-sum-exp, dS^T = P^T (dP^T - D), and accumulates dV += P^T dO and dK += dS^T Q.
//   dQ             one block per query tile, key tiles 0 .. the diagonal: S, P, dP and dS again, dQ += dS K.
//
// The tile kernels declare __launch_bounds__(kThreads, 1): shared memory holds only 1 to 3 of their blocks per SM
// anyway, and with the hint ptxas keeps values in registers (without it, it spilled in the f16 dQ kernel at
// head size 128).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/ops/cuda/flash_attention_mma.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch09::attention_lab {

namespace {

using namespace ops::cuda::flash;  // the pieces the flash kernels share (flash_attention_tiles.cuh)
using ops::cuda::kBlockSize;
using ops::cuda::kWarpSize;

// Forward: Q, K, V tiles; scores; probabilities; running outputs; 1 / l per row.
template <int D>
constexpr size_t forward_shared_bytes() {
  return 3 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + piece_bytes<float>(kTile * kLdScores) +
         piece_bytes<uint16_t>(kTile * kLdProbs) + piece_bytes<float>(kTile * kLdOut<D>) + piece_bytes<float>(kTile);
}
// dK/dV: K, V, Q, dO tiles; S^T and dP^T; P^T and dS^T; dK and dV; lse and D of the query tile.
template <int D>
constexpr size_t key_grads_shared_bytes() {
  return 4 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + 2 * piece_bytes<float>(kTile * kLdScores) +
         2 * piece_bytes<uint16_t>(kTile * kLdProbs) + 2 * piece_bytes<float>(kTile * kLdOut<D>) +
         2 * piece_bytes<float>(kTile);
}
// dQ: Q, dO, K, V tiles; S and dP; dS; dQ.
template <int D>
constexpr size_t query_grads_shared_bytes() {
  return 4 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + 2 * piece_bytes<float>(kTile * kLdScores) +
         piece_bytes<uint16_t>(kTile * kLdProbs) + piece_bytes<float>(kTile * kLdOut<D>);
}

// ---------------------------------------------------------------- forward

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wmma_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);
  float* scores = pieces.take<float>(kTile * kLdScores);
  E* probs = pieces.take<E>(kTile * kLdProbs);
  float* o = pieces.take<float>(kTile * kLdOut<D>);
  float* inv_sum = pieces.take<float>(kTile);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kTile;  // the longest tiles first
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int strip = warp * kStrip;            // the warp's first row in the tile
  const int row = lane / 2, half = lane % 2;  // the lane's row of the strip and its half of the columns
  const int t = t0 + strip + row;             // the lane's query
  const int64_t ld = s.ld_qkv();
  const E* q_head = qkv + s.head_offset(b, h, ld);

  load_tile<D>(q, q_head, t0, s, ld);
  for (int i = threadIdx.x; i < kTile * kLdOut<D>; i += kThreads) o[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // the row's running max and sum (both lanes of the row hold them)

  const int last_key_tile = (min(t0 + kTile, s.T) - 1) / kTile;
  for (int kt = 0; kt <= last_key_tile; ++kt) {
    const int s0 = kt * kTile;
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<D>(k, q_head + s.C, s0, s, ld);
    load_tile<D>(v, q_head + 2 * s.C, s0, s, ld);
    __syncthreads();

    // S = Q K^T for the warp's 16 queries and the tile's 64 keys.
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        scores + strip * kLdScores, kLdScores, q + strip * kLdTile<D>, kLdTile<D>, k, kLdTile<D>, false);
    __syncwarp();

    // Online softmax: the row's new max, the rescale of what was summed under the old one, P = exp(S - max).
    const float* score_row = scores + (strip + row) * kLdScores + half * kHalfCols;
    float tile_max = -INFINITY;
    for (int c = 0; c < kHalfCols; ++c) {
      const int key = s0 + half * kHalfCols + c;
      if (key <= t && key < s.T) tile_max = fmaxf(tile_max, score_row[c] * s.scale);
    }
    const float new_max = fmaxf(m, pair_max(tile_max));
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // a row that has seen no key yet stays at zero
    const float rescale = expf(m - base);                      // 0 while m is -inf
    E* prob_row = probs + (strip + row) * kLdProbs + half * kHalfCols;
    float sum = 0.0f;
    for (int c = 0; c < kHalfCols; ++c) {
      const int key = s0 + half * kHalfCols + c;
      const float p = key <= t && key < s.T ? expf(score_row[c] * s.scale - base) : 0.0f;
      sum += p;
      store(prob_row[c], p);
    }
    l = l * rescale + pair_sum(sum);
    m = new_max;
    float* o_row = o + (strip + row) * kLdOut<D> + half * (D / 2);
    for (int c = 0; c < D / 2; ++c) o_row[c] *= rescale;
    __syncwarp();

    // O += P V
    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        o + strip * kLdOut<D>, kLdOut<D>, probs + strip * kLdProbs, kLdProbs, v, kLdTile<D>, true);
  }

  if (half == 0) {
    inv_sum[strip + row] = 1.0f / l;
    if (t < s.T) lse[static_cast<int64_t>(bh) * s.T + t] = m + logf(l);
  }
  __syncwarp();
  E* out_head = out + s.head_offset(b, h, s.C);
  for (int r = 0; r < kStrip; ++r) {
    const int query = t0 + strip + r;
    if (query >= s.T) break;
    for (int c = lane; c < s.hs; c += kWarpSize)
      store(out_head[static_cast<int64_t>(query) * s.C + c], o[(strip + r) * kLdOut<D> + c] * inv_sum[strip + r]);
  }
}

// ---------------------------------------------------------------- backward: dK, dV

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wmma_key_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                                int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* dO = pieces.take<E>(kTile * kLdTile<D>);
  float* st = pieces.take<float>(kTile * kLdScores);   // S^T, [keys, queries]
  float* dpt = pieces.take<float>(kTile * kLdScores);  // dP^T
  E* pt = pieces.take<E>(kTile * kLdProbs);            // P^T
  E* dst = pieces.take<E>(kTile * kLdProbs);           // dS^T
  float* dk = pieces.take<float>(kTile * kLdOut<D>);
  float* dv = pieces.take<float>(kTile * kLdOut<D>);
  float* tile_lse = pieces.take<float>(kTile);
  float* tile_D = pieces.take<float>(kTile);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int s0 = static_cast<int>(blockIdx.y) * kTile;  // the first key tiles see the most queries: they start first
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int strip = warp * kStrip, row = lane / 2, half = lane % 2;
  const int key = s0 + strip + row;  // the lane's key
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);

  load_tile<D>(k, qkv + head + s.C, s0, s, ld);
  load_tile<D>(v, qkv + head + 2 * s.C, s0, s, ld);
  for (int i = threadIdx.x; i < kTile * kLdOut<D>; i += kThreads) dk[i] = dv[i] = 0.0f;

  // Query tiles from the diagonal (earlier queries see none of these keys) to the last.
  for (int qt = s0 / kTile; qt < query_tiles; ++qt) {
    const int t0 = qt * kTile;
    __syncthreads();  // every warp is done with the previous Q, dO, lse and D
    load_tile<D>(q, qkv + head, t0, s, ld);
    load_tile<D>(dO, dout_head, t0, s, s.C);
    load_query_rows(tile_lse, tile_D, lse, D_rows, bh, t0, s, 1.0f);
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys and the tile's 64 queries.
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        st + strip * kLdScores, kLdScores, k + strip * kLdTile<D>, kLdTile<D>, q, kLdTile<D>, false);
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        dpt + strip * kLdScores, kLdScores, v + strip * kLdTile<D>, kLdTile<D>, dO, kLdTile<D>, false);
    __syncwarp();
    // P^T = exp(scale S^T - lse) where the query sees the key, dS^T = P^T (dP^T - D).
    for (int c = half * kHalfCols; c < (half + 1) * kHalfCols; ++c) {
      const int query = t0 + c;
      const int at = (strip + row) * kLdScores + c;
      const float p = query >= key && query < s.T ? expf(st[at] * s.scale - tile_lse[c]) : 0.0f;
      store(pt[(strip + row) * kLdProbs + c], p);
      store(dst[(strip + row) * kLdProbs + c], p * (dpt[at] - tile_D[c]));
    }
    __syncwarp();
    // dV += P^T dO, dK += dS^T Q (scaled once at the end)
    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        dv + strip * kLdOut<D>, kLdOut<D>, pt + strip * kLdProbs, kLdProbs, dO, kLdTile<D>, true);
    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        dk + strip * kLdOut<D>, kLdOut<D>, dst + strip * kLdProbs, kLdProbs, q, kLdTile<D>, true);
  }
  __syncwarp();
  add_strip<D>(dqkv + head + s.C, ld, s0 + strip, dk + strip * kLdOut<D>, s.scale, s);
  add_strip<D>(dqkv + head + 2 * s.C, ld, s0 + strip, dv + strip * kLdOut<D>, 1.0f, s);
}

// ---------------------------------------------------------------- backward: dQ

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wmma_query_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                                  int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* q = pieces.take<E>(kTile * kLdTile<D>);
  E* dO = pieces.take<E>(kTile * kLdTile<D>);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);
  float* scores = pieces.take<float>(kTile * kLdScores);
  float* dp = pieces.take<float>(kTile * kLdScores);
  E* ds = pieces.take<E>(kTile * kLdProbs);
  float* dq = pieces.take<float>(kTile * kLdOut<D>);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int t0 = (query_tiles - 1 - static_cast<int>(blockIdx.y)) * kTile;  // the longest tiles first
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int strip = warp * kStrip, row = lane / 2, half = lane % 2;
  const int t = t0 + strip + row;  // the lane's query
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const float row_lse = t < s.T ? lse[static_cast<int64_t>(bh) * s.T + t] : 0.0f;
  const float row_D = t < s.T ? D_rows[static_cast<int64_t>(bh) * s.T + t] : 0.0f;

  load_tile<D>(q, qkv + head, t0, s, ld);
  load_tile<D>(dO, dout + s.head_offset(b, h, s.C), t0, s, s.C);
  for (int i = threadIdx.x; i < kTile * kLdOut<D>; i += kThreads) dq[i] = 0.0f;

  const int last_key_tile = (min(t0 + kTile, s.T) - 1) / kTile;
  for (int kt = 0; kt <= last_key_tile; ++kt) {
    const int s0 = kt * kTile;
    __syncthreads();  // every warp is done with the previous K and V
    load_tile<D>(k, qkv + head + s.C, s0, s, ld);
    load_tile<D>(v, qkv + head + 2 * s.C, s0, s, ld);
    __syncthreads();

    // S = Q K^T and dP = dO V^T for the warp's 16 queries and the tile's 64 keys.
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        scores + strip * kLdScores, kLdScores, q + strip * kLdTile<D>, kLdTile<D>, k, kLdTile<D>, false);
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        dp + strip * kLdScores, kLdScores, dO + strip * kLdTile<D>, kLdTile<D>, v, kLdTile<D>, false);
    __syncwarp();
    for (int c = half * kHalfCols; c < (half + 1) * kHalfCols; ++c) {
      const int key = s0 + c;
      const int at = (strip + row) * kLdScores + c;
      const float p = key <= t && t < s.T ? expf(scores[at] * s.scale - row_lse) : 0.0f;
      store(ds[(strip + row) * kLdProbs + c], p * (dp[at] - row_D));
    }
    __syncwarp();
    // dQ += dS K (scaled once at the end)
    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        dq + strip * kLdOut<D>, kLdOut<D>, ds + strip * kLdProbs, kLdProbs, k, kLdTile<D>, true);
  }
  __syncwarp();
  add_strip<D>(dqkv + head, ld, t0 + strip, dq + strip * kLdOut<D>, s.scale, s);
}

}  // namespace

void flash_wmma_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    constexpr int D = decltype(width)::value;
    launch_forward_tiles<E>("flash_wmma_forward_kernel", flash_wmma_forward_kernel<E, D>, forward_shared_bytes<D>(),
                            out, lse, qkv, s, scope.stream());
  });
}

void flash_wmma_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                         const Tensor& lse, int n_head) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, scope.stream());
    constexpr int D = decltype(width)::value;
    launch_backward_tiles<E>("flash_wmma_key_grads_kernel", flash_wmma_key_grads_kernel<E, D>,
                             key_grads_shared_bytes<D>(), dqkv, dout, qkv, lse, D_rows, s, scope.stream());
    launch_backward_tiles<E>("flash_wmma_query_grads_kernel", flash_wmma_query_grads_kernel<E, D>,
                             query_grads_shared_bytes<D>(), dqkv, dout, qkv, lse, D_rows, s, scope.stream());
  });
}

}  // namespace lab::ch09::attention_lab
