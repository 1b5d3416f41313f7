// CUDA flash attention (common/ops/flash_attention.h): bf16 and f16 inputs, products on tensor cores with f32
// accumulation (flash_attention_mma.cuh), the softmax in f32. The CPU version (cpu/flash_attention.cpp) takes
// the same steps with the same 64 x 64 tiles.
//
// Every kernel runs 4 warps (128 threads) on one 64-row tile of one (batch, head); each warp owns 16 of the
// tile's rows from start to end, so after a tile of keys (or queries) has been loaded into shared memory by the
// whole block, a warp computes its strip of scores, its softmax and its products alone, meeting the other
// warps only at the barriers around the next load. Within a warp, lanes 2r and 2r+1 share row r of the strip:
// each takes half of its columns, and one shuffle combines their row maxima and sums.
//
// Shared memory holds the 16-bit tiles (rows padded by 8 elements: WMMA wants leading dimensions in multiples
// of 16 bytes, and the padding also moves consecutive rows to other banks), f32 scores, and the f32 running
// outputs: an accumulator fragment's lane layout is unspecified, so rows are rescaled in shared memory, not in
// fragments. 110 KiB (head size 128) or 70 KiB (64) for the forward: above the default 48 KiB, so each launch
// raises the kernel's limit first.
//
//   forward        one block per query tile; key tiles 0 .. the diagonal streamed through shared memory
//                  (tiles above the diagonal are entirely masked and never loaded); online softmax with the
//                  row max and sum in registers; writes O and the row log-sum-exp. Blocks are numbered so that
//                  the longest tiles (the last queries see every key) start first and the short ones fill in
//                  at the end of the grid, as FlashAttention-2 orders them.
//   D pre-pass     D = rowsum(dO * O), one warp per row.
//   dK, dV         one block per key tile; query tiles from the diagonal to the end streamed; each warp
//                  computes its 16 keys' strip of S^T = K Q^T and dP^T = V dO^T, recomputes P^T from the saved
//                  log-sum-exp, dS^T = P^T (dP^T - D), and accumulates dV += P^T dO and dK += dS^T Q.
//   dQ             one block per query tile, key tiles 0 .. the diagonal: S, P, dP and dS again, dQ += dS K.
// dQ by a separate pass, not by atomics from the dK/dV blocks: the dK/dV blocks would have to add into an f32
// copy of dQ (16-bit atomics round at every add) that then needs its own conversion pass anyway, and the result
// would depend on the order in which blocks arrive. The separate pass recomputes S and dP (7 tile products per
// tile pair instead of 5, 40% more backward math), but is deterministic, needs no [B,T,C] f32 workspace, and
// adds into dqkv in its own dtype as the dK/dV pass does. (FlashAttention-2 uses atomics; chapter 9's attention
// lab has that version too, v5, to measure the two side by side.)
//
// The tile kernels declare __launch_bounds__(kThreads, 1): shared memory holds only 1 to 3 of their blocks per SM
// anyway, and with the hint ptxas keeps values in registers (without it, it spilled in the f16 dQ kernel at
// head size 128).
//
// f32 inputs: not flash attention. They take the materialised path of attention.h (cuBLAS in the math mode of
// common/cuda/cublas.h) with the T x T probabilities in a workspace for the duration of the call; the
// log-sum-exp is recovered from the probabilities (below), and the backward recomputes them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/core/memory.h"
#include "common/ops/attention.h"
#include "common/ops/cuda/flash_attention_mma.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/flash_attention.h"

namespace lab::ops::cuda {

namespace {

using namespace flash;  // the pieces the flash kernels share (flash_attention_tiles.cuh)

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
    flash_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
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
    flash_key_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
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
    for (int i = threadIdx.x; i < kTile; i += kThreads) {
      const bool inside = t0 + i < s.T;
      tile_lse[i] = inside ? lse[static_cast<int64_t>(bh) * s.T + t0 + i] : 0.0f;
      tile_D[i] = inside ? D_rows[static_cast<int64_t>(bh) * s.T + t0 + i] : 0.0f;
    }
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
    flash_query_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
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
  launch_tiles("flash_key_grads_kernel", flash_key_grads_kernel<E, D>, grid, key_grads_shared_bytes<D>(), stream,
               static_cast<E*>(dqkv.raw()), static_cast<const E*>(qkv.raw()), static_cast<const E*>(dout.raw()),
               lse.data<float>(), D_rows.data<float>(), s, query_tiles);
  launch_tiles("flash_query_grads_kernel", flash_query_grads_kernel<E, D>, grid, query_grads_shared_bytes<D>(), stream,
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
    const MemoryScope workspace(MemCategory::Workspace);
    const Tensor D_rows = Tensor::empty(lse.shape(), DType::F32, lse.device());
    const int64_t rows = lse.numel();
    LAB_LAUNCH((flash_row_dot_kernel<E>), {grid_for(rows, kWarpRowsPerBlock), kBlockSize, 0, scope.stream()},
               D_rows.data<float>(), static_cast<const E*>(dout.raw()), static_cast<const E*>(out.raw()), rows, s);
    backward_tiles<E, decltype(width)::value>(dqkv, dout, qkv, lse, D_rows, s, scope.stream());
  });
}

}  // namespace lab::ops::cuda
