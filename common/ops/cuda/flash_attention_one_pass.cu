// CUDA flash attention's one-pass backward (FlashBackward::OnePass, common/ops/flash_attention.h): dK, dV and dQ in
// one pass over the key tiles, dQ added by f32 atomics, as FlashAttention-2 does it. v9 of chapter 9's attention
// lab, where it is timed beside the two passes of flash_attention.cu (v7).
//
// The two-pass backward walks the key tiles for dK and dV, then walks the query tiles a second time for dQ,
// recomputing S and dP: 7 tile products per pair of tiles. Here the pass is the two passes' dK/dV kernel (R = 1),
// unchanged in what it computes and how: one block of 4 warps per 64-key tile, the query tiles from the diagonal to
// the end streamed by cp.async into two buffers, each warp owning 16 keys with P^T, dS^T, dK and dV in registers, a
// step of queries at a time (32 at head size 128, 16 at 64: below). What it adds, at every step:
//
//   1. the warp's dS^T fragments, rounded to 16 bits as the dK product reads them, into a [64 keys, step] buffer
//      of shared memory (one 32-bit store per pair of values);
//   2. a block barrier: a query's dQ needs the keys of all four warps;
//   3. dQ[step, D] = dS K over the tile's 64 keys, a quarter per warp (16 queries by D / 4 columns at a step of 16,
//      by D / 2 at 32), by mma.sync: dS^T read with ldmatrix .trans is dS's A fragment, K the B operand as V is in
//      P V;
//   4. the warp's quarter added into an f32 dQ workspace [B, T, C] with atomicAdd (every key tile adds into the
//      same rows).
// 5 tile products per pair instead of 7. The dQ fragments live from step 3 to step 4 only, after the step's P^T and
// dS^T fragments are dead, and are accumulated 16 or 32 columns at a time. Even so, the addresses and the longer
// loop body cost a few registers across the whole loop, and at head size 64, where the two-pass dK/dV kernel
// took all 168 registers that 3 blocks per SM leave it (163 since), steps of 32 spilled; steps of 16 halve P^T and
// dS^T and fit, at the price of loading the warp's K and V fragments twice as often and of 4 barriers per query
// tile instead of 2. Two dS^T buffers, used in turn, make one barrier a step enough: a warp refills a buffer only
// after the next step's barrier, which every warp reaches after reading it.
// Before the pass the workspace is zero-filled; after it, one elementwise kernel scales it by 1/sqrt(HS) and writes
// (GradWrite::Overwrite) or adds (GradWrite::Add) it, rounded, into the q third of dqkv.
//
// The price, against the two passes: the f32 workspace (4 bytes per element of dQ, 25.2 MB at B = 8, T = 1024,
// C = 768, alive for the call), its zero-fill and conversion pass, 8.5 atomic adds per element of dQ at that shape,
// and results that change in their last bits from run to run (the atomics' order decides the rounding). Which is
// faster is the GPU's to say: on an H200, the lab's v5 (this algorithm on the WMMA kernels of v4) took 10% (head
// size 64) and 32% (128) less time than v4's two passes.
//
// Resources at sm_90 (nvcc 13 -O3, ptxas -v; no spills, no local memory), registers per thread and dynamic shared
// memory per block of 128 threads, head size 64 | 128 (scripts/kernel_resources.py):
//   dK, dV, dQ    168 | 244 registers, 61 | 113 KiB   (the two-pass dK/dV kernel: 163 | 244, 55 | 103 KiB)
// 3 blocks per SM at head size 64, 2 at 128, as the two-pass kernels (at 128 the two blocks' shared memory, with
// the 1 KiB the runtime reserves in each, fills the SM's 228 KiB exactly).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "common/core/memory.h"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_one_pass.h"
#include "common/ops/cuda/flash_attention_pipeline.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"

namespace lab::ops::cuda {

namespace {

using namespace flash;  // tiles, fragments, Dims, the D pre-pass, launch helpers

// Blocks per SM the kernel is compiled for (__launch_bounds__), the two-pass dK/dV kernel's: ptxas caps the registers
// at 64K / (128 x this). Unused where __launch_bounds__ means nothing (the emulation build).
template <int D>
[[maybe_unused]] constexpr int kGradsBlocks = D == 64 ? 3 : 2;

// Queries per step: the two-pass kernel's 32 at head size 128; 16 at 64, where 32 spilled (see the top of the file).
template <int D>
inline constexpr int kStep = D == 64 ? 16 : 32;

// A step's dS^T in shared memory: [64 keys, kStep queries] 16-bit values, held as 32-bit words (pairs of adjacent
// queries, as a C fragment packs them), rows padded by 8 values (48 or 80 bytes: the 8 rows of an ldmatrix and the
// 8 rows of a warp's stores fall in different banks).
template <int D>
inline constexpr int kLdStepWords = (kStep<D> + 8) / 2;
template <int D>
constexpr int step_words() {
  return kTile * kLdStepWords<D>;
}

// A step's dQ [kStep, D] shared by the 4 warps: each a 16-query strip of it and a quarter (steps of 16) or a half
// (steps of 32) of its columns, accumulated kChunk columns at a time (all 64 at once spilled at head size 128).
template <int D>
inline constexpr int kStepStrips = kStep<D> / kStrip;
template <int D>
inline constexpr int kDqCols = D / (kWarps / kStepStrips<D>);
template <int D>
inline constexpr int kChunk = kDqCols<D> < 32 ? kDqCols<D> : 32;

// Shared memory: the two-pass dK/dV kernel's (K, V, two buffers each of Q and dO, two of a query tile's lse and D) and
// two steps' dS^T.
template <int D>
constexpr size_t grads_shared_bytes() {
  return 6 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + 4 * piece_bytes<float>(kTile) +
         2 * piece_bytes<uint32_t>(step_words<D>());
}

// ---------------------------------------------------------------- dQ of a step

// The warp's quarter of a step's dQ = dS K: queries [t0 + c0 + rows, + 16) by columns [cols, cols + kDqCols), over
// the key tile's 64 keys, added into the f32 sum (unscaled: the conversion pass multiplies by 1/sqrt(HS)). A is
// dS, read from the step's dS^T (rows are keys) with ldmatrix .trans: the 8 x 8 pieces of dS^T at (keys k0, k0 + 8)
// x (queries m0, m0 + 8), transposed, are A's four registers, in the order in which bt_row/bt_col name the rows of
// a K-like tile. kMasked (the diagonal tile, and a last tile past T): the k16 steps of keys past the strip's last
// query are skipped; their dS^T is zero and, where its warp skipped the step, was never written.
template <bool kMasked, typename E, int D>
__device__ inline void add_step_dq(float* dq_head, const uint32_t* step_ds, const E* k, int s0, int t0, int c0,
                                   const Dims& s) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr int kStrips = kStepStrips<D>, kCols = kDqCols<D>;
  const int rows = warp % kStrips * kStrip, cols = warp / kStrips * kCols;
  const int live_keys = kMasked ? t0 + c0 + rows + kStrip - s0 : kTile;  // keys some query of the strip sees
  // The lane's two queries (rows g and g + 8 of the strip) at its first column: every address below is one of
  // these two plus a constant.
  const int query = t0 + c0 + rows + lane / 4, c = cols + 2 * (lane % 4);
  float* const row = dq_head + static_cast<int64_t>(query) * s.C + c;
  const int64_t eight_rows = 8 * static_cast<int64_t>(s.C);
  // kChunk columns at a time, the A fragments loaded again for each.
#pragma unroll
  for (int chunk = 0; chunk < kCols; chunk += kChunk<D>) {
    float acc[kChunk<D> / 8][4];
#pragma unroll
    for (int n = 0; n < kChunk<D> / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      if (kMasked && kk * 16 >= live_keys) continue;
      uint32_t a[4];
      mma::ldmatrix_x4_trans(
          a, step_ds + (kk * 16 + mma::bt_row(lane)) * kLdStepWords<D> + (rows + mma::bt_col(lane)) / 2);
#pragma unroll
      for (int nn = 0; nn < kChunk<D> / 16; ++nn) {
        uint32_t b[4];
        load_b_rows_k<D>(b, k, kk * 16, cols + chunk + nn * 16);
        mma::mma_accumulate<E>(acc[2 * nn], a, b);
        mma::mma_accumulate<E>(acc[2 * nn + 1], a, b + 2);
      }
    }
#pragma unroll
    for (int n = 0; n < kChunk<D> / 8; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int dc = chunk + 8 * n + i % 2;  // column offset from c
        if (query + 8 * (i / 2) < s.T && c + dc < s.hs) atomicAdd(row + (i / 2) * eight_rows + dc, acc[n][i]);
      }
  }
}

// ---------------------------------------------------------------- dK, dV and dQ in one pass

// One query tile for the warp's 16 keys, in steps of kStep queries: flash_attention_backward.cuh's key_grads_query_tile
// (S^T = K Q^T, P^T from the saved lse, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q), plus dS^T
// into the step's buffer, a barrier, and the warp's quarter of the step's dQ. A warp whose keys no query of a step sees
// (kMasked, on the diagonal) skips the step's products as there, but not the barrier nor its quarter of dQ.
template <bool kMasked, typename E, int D>
__device__ inline void grads_query_tile(float dk[D / 8][4], float dv[D / 8][4], float* dq_head, uint32_t* ds_steps,
                                        const E* k, const E* v, const E* q, const E* dO, const float* tile_lse,
                                        const float* tile_D, int strip, int s0, int t0, int first_live, const Dims& s,
                                        float scale_log2) {
  const int key0 = s0 + strip;
#pragma unroll 1
  for (int c0 = 0; c0 < kTile; c0 += kStep<D>) {
    uint32_t* step_ds = ds_steps + (c0 / kStep<D>) % 2 * step_words<D>();
    const int step_end = c0 + kStep<D>;
    if (!kMasked || step_end > first_live) {
      float p[kStep<D> / 8][4];
      strip_times_tile_t<E, D, kStep<D>>(p, k, strip, q, c0, first_live);
#pragma unroll
      for (int n = 0; n < kStep<D> / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = c0 + frag_col(n, i);
          p[n][i] = exp2f(fmaf(p[n][i], scale_log2, -tile_lse[c] * kLog2e));
          if (kMasked) {
            const int key = key0 + frag_row(i), query = t0 + c;
            if (query < key || query >= s.T) p[n][i] = 0.0f;
          }
        }
      probs_times_tile<E, D, kStep<D>>(dv, p, dO, c0, first_live);

      float ds[kStep<D> / 8][4];
      strip_times_tile_t<E, D, kStep<D>>(ds, v, strip, dO, c0, first_live);
#pragma unroll
      for (int n = 0; n < kStep<D> / 8; ++n) {
#pragma unroll
        for (int i = 0; i < 4; ++i) ds[n][i] = p[n][i] * (ds[n][i] - tile_D[c0 + frag_col(n, i)]);
      }
      // The rounded pairs are those the dK product packs into its A fragments (the compiler computes them once).
#pragma unroll
      for (int n = 0; n < kStep<D> / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; i += 2)
          step_ds[(strip + frag_row(i)) * kLdStepWords<D> + frag_col(n, i) / 2] = mma::pack<E>(ds[n][i], ds[n][i + 1]);
      probs_times_tile<E, D, kStep<D>>(dk, ds, q, c0, first_live);
    }
    __syncthreads();  // the step's dS^T complete: each query's dQ needs every warp's keys
    add_step_dq<kMasked, E, D>(dq_head, step_ds, k, s0, t0, c0, s);
  }
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kGradsBlocks<D>)
    flash_one_pass_grads_kernel(E* dqkv, const E* qkv, const E* dout, const float* lse, const float* D_rows, Dims s,
                                int query_tiles, float* dq_sum, bool add) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  SharedPieces pieces(shared);
  E* k = pieces.take<E>(kTile * kLdTile<D>);
  E* v = pieces.take<E>(kTile * kLdTile<D>);
  const TilePair<E, D> q = take_pair<E, D>(pieces), dO = take_pair<E, D>(pieces);
  float* rows = pieces.take<float>(4 * kTile);                      // two buffers of a query tile's lse, then its D
  uint32_t* ds_steps = pieces.take<uint32_t>(2 * step_words<D>());  // two steps' dS^T, used in turn

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int s0 = static_cast<int>(blockIdx.y) * kTile;  // the first key tiles see the most queries: they start first
  const int strip = threadIdx.x / kWarpSize * kStrip;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);
  float* dq_head = dq_sum + s.head_offset(b, h, s.C);
  const float scale_log2 = s.scale * kLog2e;
  const int first_tile = s0 / kTile;  // the diagonal: earlier queries see none of these keys

  // Batch 0: the block's K and V tiles and the first query tile's Q and dO.
  issue_tile<D>(k, qkv + head + s.C, s0, s, ld);
  issue_tile<D>(v, qkv + head + 2 * s.C, s0, s, ld);
  issue_query_tile<D>(q, dO, rows, qkv + head, dout_head, lse, D_rows, bh, first_tile, s, ld);
  __pipeline_commit();
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};

  for (int qt = first_tile; qt < query_tiles; ++qt) {
    const int t0 = qt * kTile;
    const bool next = qt + 1 < query_tiles;
    // Into the buffers of tile qt - 1. The two-pass kernel needs a barrier at the end of each tile before this refill;
    // here the barrier of tile qt - 1's last step comes after every warp's last read of them (the dQ products after it
    // read only K and dS^T).
    if (next) {
      issue_query_tile<D>(q, dO, rows, qkv + head, dout_head, lse, D_rows, bh, qt + 1, s, ld);
      __pipeline_commit();
    }
    wait_for_current_tile(next);
    __syncthreads();  // every thread's copies of tile qt have landed
    const float* tile_lse = rows + (qt % 2) * 2 * kTile;
    const float* tile_D = tile_lse + kTile;
    if (qt == first_tile || t0 + kTile > s.T)
      grads_query_tile<true, E, D>(dk, dv, dq_head, ds_steps, k, v, q[qt], dO[qt], tile_lse, tile_D, strip, s0, t0,
                                   qt == first_tile ? strip : 0, s, scale_log2);
    else
      grads_query_tile<false, E, D>(dk, dv, dq_head, ds_steps, k, v, q[qt], dO[qt], tile_lse, tile_D, strip, s0, t0, 0,
                                    s, scale_log2);
  }
  add_fragments<D>(dqkv + head + s.C, ld, s0 + strip, dk, s.scale, s, add);
  add_fragments<D>(dqkv + head + 2 * s.C, ld, s0 + strip, dv, 1.0f, s, add);
}

// ---------------------------------------------------------------- dQ into dqkv

// dqkv's q part = (or +=) scale * dq_sum, rounded to E: one thread per element of [B, T, C], for widths C that do not
// split into 16-byte pieces of E.
template <typename E>
__global__ void flash_dq_into_dqkv_kernel(E* dqkv, const float* dq_sum, int64_t n, int C, float scale, bool add) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  E& dst = dqkv[i / C * 3 * C + i % C];
  const float dq = scale * dq_sum[i];
  store(dst, add ? to_float(dst) + dq : dq);
}

// The same by 16-byte pieces of E (8 values), when C is a whole number of them (GPT-2's 768: 96): a thread reads two
// 16-byte pieces of the f32 sums and writes (with Add, reads first) one piece of dqkv, whose q rows then start
// 16-byte aligned (3C values apart); its row and column come from a 32-bit division per 8 elements, not a 64-bit
// one per element.
template <typename E>
__global__ void flash_dq_pieces_into_dqkv_kernel(E* dqkv, const float* dq_sum, uint32_t pieces, uint32_t row_pieces,
                                                 float scale, bool add) {
  constexpr int kPer = Piece<E>::kElements;
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pieces) return;
  const uint32_t row = p / row_pieces, col = p % row_pieces;
  const Piece<float>* sums = reinterpret_cast<const Piece<float>*>(dq_sum) + 2 * static_cast<int64_t>(p);
  const Piece<float> lo = sums[0], hi = sums[1];
  Piece<E>* dst = reinterpret_cast<Piece<E>*>(dqkv) + static_cast<int64_t>(row) * 3 * row_pieces + col;
  Piece<E> q = add ? *dst : Piece<E>{};
#pragma unroll
  for (int e = 0; e < kPer; ++e) {
    const float dq = scale * (e < kPer / 2 ? lo.e[e] : hi.e[e - kPer / 2]);
    store(q.e[e], add ? to_float(q.e[e]) + dq : dq);
  }
  *dst = q;
}

// ---------------------------------------------------------------- launcher

template <typename E, int D>
void backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
              const Dims& s, bool add, cudaStream_t stream) {
  const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, stream);
  const MemoryScope workspace(MemCategory::Workspace);
  const Tensor dq_sum = Tensor::zeros(out.shape(), DType::F32, out.device());
  launch_backward_tiles<E>("flash_one_pass_grads_kernel", flash_one_pass_grads_kernel<E, D>, grads_shared_bytes<D>(),
                           dqkv, dout, qkv, lse, D_rows, s, stream, dq_sum.data<float>(), add);
  const int64_t n = out.numel();
  E* const dq = static_cast<E*>(dqkv.raw());
  const int64_t row_pieces = pieces_of<E>(s.C, dq, dq_sum.data<float>());
  if (row_pieces > 0 && n / Piece<E>::kElements <= std::numeric_limits<uint32_t>::max()) {
    const int64_t pieces = n / Piece<E>::kElements;
    LAB_LAUNCH((flash_dq_pieces_into_dqkv_kernel<E>), {grid_for(pieces, kBlockSize), kBlockSize, 0, stream}, dq,
               dq_sum.data<float>(), static_cast<uint32_t>(pieces), static_cast<uint32_t>(row_pieces), s.scale, add);
    return;
  }
  LAB_LAUNCH((flash_dq_into_dqkv_kernel<E>), {grid_for(n, kBlockSize), kBlockSize, 0, stream}, dq, dq_sum.data<float>(),
             n, s.C, s.scale, add);
}

}  // namespace

void flash_attention_backward_one_pass(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                                       const Tensor& lse, int n_head, GradWrite dqkv_write) {
  const Dims s = dims_of(qkv, n_head);
  LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    backward<decltype(element), decltype(width)::value>(dqkv, dout, qkv, out, lse, s, dqkv_write == GradWrite::Add,
                                                        scope.stream());
  });
}

}  // namespace lab::ops::cuda
