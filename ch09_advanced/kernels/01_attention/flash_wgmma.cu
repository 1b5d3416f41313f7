// v14 and v15 of the attention lab. v14: the forward of v7 (common/ops/cuda/flash_attention_forward.cuh, R = 1) with
// its two products on Hopper's warpgroup instructions (common/ops/cuda/warpgroup_mma.cuh) instead of mma.sync.
//
// The block's 4 warps are one warpgroup, and its 64 queries one m64 product. Per key tile:
//   S = Q K^T   wgmma m64n64k16, HS / 16 of them, A (the Q tile) and B (the K tile) read by the tensor cores
//               straight from shared memory: no ldmatrix, no operand registers;
//   softmax     v7's, on the accumulator, which holds in each warp the C fragments of v7's strip of 16 queries;
//   O += P V    wgmma m64nHSk16, 4 of them (64 keys), A = P from registers (the accumulator rounded and packed, as
//               in v7), B the V tile from shared memory, N-major: no transposing load.
// What stays v7's: the tiles, the grid (longest query tiles first), the two buffers a K or V tile takes and the
// cp.async copies of the next tile during this one, the mask's arithmetic on the diagonal tile only, the lse.
//
// Shared tiles are stored the way the tensor cores read them, in core matrices of 8 rows x 16 bytes (128
// contiguous bytes): element (row, col) of a [64, HS] tile at (row % 8) * 8 + (col / 8) * 64 + (row / 8) * HS * 8
// + col % 8 elements. 16-byte piece i of a tile is then its 16 bytes at 16 i, so consecutive threads copy
// consecutive pieces. The same storage serves all three operands with other strides: read K-major (Q, K: rows are
// M or N, columns k) the next 8 columns are 128 bytes on (LBO) and the next 8 rows HS * 16 (SBO); read N-major (V:
// rows are k, columns n) the next 8 rows are the LBO, HS * 16 bytes, and the next 8 columns the SBO, 128.
//
// v14 waits for each product before it uses the result (wait<0>), so the softmax and the products take turns. v15
// (the lab's next version, below in this file) pipelines them within the warpgroup, as FlashAttention-3 does: each
// iteration queues the tile's S = Q K^T and the previous tile's P V, waits for S only, and computes its softmax while
// the tensor cores still run the P V. Only sm_90a has these instructions: the file is compiled for it where the build
// targets sm_90 (ch09_advanced/kernels/01_attention/CMakeLists.txt), and the lab leaves v14 and v15 out on other GPUs
// and builds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/core/error.h"
#include "common/ops/cuda/flash_attention_forward.cuh"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_pipeline.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"
#include "common/ops/cuda/warpgroup_mma.cuh"

namespace lab::ch09::attention_lab {

namespace {

using namespace ops::cuda::flash;  // tiles, fragments, Dims, launch helpers
namespace mma = ops::cuda::mma;
namespace wgmma = ops::cuda::wgmma;
using ops::cuda::kWarpSize;
using wgmma::BMajor;

static_assert(kThreads == wgmma::kWarpgroupThreads && kTile == 64, "a block is one warpgroup, its tile one m64");

// Blocks per SM the kernel is compiled for (__launch_bounds__): no spill at sm_90a. Unused in the emulation build.
template <int D>
[[maybe_unused]] constexpr int kBlocks = D == 64 ? 3 : 2;
template <int D>
[[maybe_unused]] constexpr int kOverlappedBlocks = D == 64 ? 3 : 2;

// ---------------------------------------------------------------- tiles in core matrices

template <int D>
constexpr int kTileElements = kTile* D;
template <int D>
constexpr uint32_t kRowGroupBytes = D * 16;  // 8 rows of the tile: D / 8 core matrices

template <int D>
__device__ inline int core_offset(int row, int col) {
  return (row % 8) * 8 + (col / 8) * 64 + (row / 8) * D * 8 + col % 8;
}
template <int D>
struct CoreMatrices {  // load_tile's offset for a tile in core matrices
  __device__ int operator()(int r, int c) const { return core_offset<D>(r, c); }
};

// Rows [first_row, first_row + 64) of one head into a [64, D] tile in core matrices, zeros past T and past hs:
// 16-byte cp.async copies where the head fills the width and sits 16-byte aligned (piece i of the tile is row
// 8 (i / D) + i % 8, columns 8 ((i / 8) % (D / 8)) ..), element by element otherwise. All threads; the caller
// commits the batch.
template <int D, typename E>
__device__ void issue_core_tile(E* tile, const E* head, int first_row, const Dims& s, int64_t ld) {
  const bool aligned = reinterpret_cast<uintptr_t>(head) % 16 == 0 && ld % 8 == 0;
  if (s.hs != D || !aligned) return load_tile<D>(tile, head, first_row, s, ld, CoreMatrices<D>{});
#pragma unroll
  for (int j = 0; j < kTileElements<D> / 8 / kThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kThreads;
    const int row = (i / D) * 8 + i % 8, col = (i / 8) % (D / 8) * 8;
    const bool inside = first_row + row < s.T;
    __pipeline_memcpy_async(tile + 8 * i, inside ? head + static_cast<int64_t>(first_row + row) * ld + col : head, 16,
                            inside ? 0 : 16);
  }
}

// The descriptors of k16 step kk: of a K-major operand (Q as A, K as B: columns 16 kk ..), of the N-major V (rows
// 16 kk ..).
template <int D, typename E>
__device__ inline uint64_t k_major_step(const E* tile, int kk) {
  return wgmma::descriptor(tile + core_offset<D>(0, 16 * kk), wgmma::kCoreMatrixBytes, kRowGroupBytes<D>);
}
template <int D, typename E>
__device__ inline uint64_t n_major_step(const E* tile, int kk) {
  return wgmma::descriptor(tile + core_offset<D>(16 * kk, 0), kRowGroupBytes<D>, wgmma::kCoreMatrixBytes);
}

// Shared memory: the Q tile and two buffers each of K and V.
template <int D>
constexpr size_t shared_bytes() {
  return 5 * piece_bytes<uint16_t>(kTileElements<D>);
}

// ---------------------------------------------------------------- the pieces of both kernels

// S = Q K^T for the block's 64 queries and the tile's 64 keys: HS / 16 products, queued (the caller commits).
template <typename E, int D>
__device__ inline void queue_scores(wgmma::Warpgroup& wg, float (&sc)[kKeyGroups][4], const E* q, const E* k) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    wg.mma_shared_a<E, kTile, BMajor::K>(sc, k_major_step<D>(q, kk), k_major_step<D>(k, kk), kk > 0);
}

// O += P V over the tile's 64 keys: 4 products, P from registers, queued (the caller commits).
template <typename E, int D>
__device__ inline void queue_probs_times_v(wgmma::Warpgroup& wg, float (&o)[D / 8][4],
                                           const uint32_t (&p)[kTile / 16][4], const E* v) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) wg.mma_registers_a<E, D, BMajor::N>(o, p[kk], n_major_step<D>(v, kk), true);
}

// P (the softmax's exponentials, f32 C fragments) rounded and packed into the A fragments of the 4 k16 steps.
template <typename E>
__device__ inline void pack_probs(uint32_t (&p)[kTile / 16][4], const float (&sc)[kKeyGroups][4]) {
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    p[kk][0] = mma::pack<E>(sc[2 * kk][0], sc[2 * kk][1]);
    p[kk][1] = mma::pack<E>(sc[2 * kk][2], sc[2 * kk][3]);
    p[kk][2] = mma::pack<E>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
    p[kk][3] = mma::pack<E>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
  }
}

// The warp's 16 rows of out (o / l, rounded to E) and their lse, as v7 writes them.
template <int D, typename E>
__device__ inline void store_rows(E* out, float* lse, const float (&o)[D / 8][4], const float (&m)[2],
                                  const float (&l)[2], int query0, int bh, int b, int h, const Dims& s,
                                  float scale_log2) {
  const int lane = threadIdx.x % kWarpSize;
  E* out_head = out + s.head_offset(b, h, s.C);
  float inv_l[2];
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const float total = row_sum(l[g]);
    inv_l[g] = 1.0f / total;
    const int t = query0 + frag_row(2 * g);
    if (lane % 4 == 0 && t < s.T) lse[static_cast<int64_t>(bh) * s.T + t] = (m[g] * scale_log2 + log2f(total)) * kLn2;
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = query0 + frag_row(i), c = frag_col(n, i);
      if (t < s.T && c < s.hs) store(out_head[static_cast<int64_t>(t) * s.C + c], o[n][i] * inv_l[i / 2]);
    }
}

// The block's shared tiles: Q, and two buffers each of K and V (key tile i in buffer i % 2).
template <typename E, int D>
struct SharedTiles {
  E* q;
  E* k_first;
  E* v_first;
  __device__ explicit SharedTiles(unsigned char* shared) {
    SharedPieces pieces(shared);
    q = pieces.take<E>(kTileElements<D>);
    k_first = pieces.take<E>(2 * kTileElements<D>);
    v_first = pieces.take<E>(2 * kTileElements<D>);
  }
  __device__ E* k(int tile) const { return k_first + (tile % 2) * kTileElements<D>; }
  __device__ E* v(int tile) const { return v_first + (tile % 2) * kTileElements<D>; }
};

// Where a block stands: its (batch, head) and its rows of qkv, its query tile (the longest first, as v7), its warp's
// first query, its last key tile (the diagonal).
template <typename E>
struct BlockTile {
  int bh, b, h, t0, query0, last_key_tile;
  int64_t ld;
  const E* q_head;  // k and v at + C, + 2 C
  float scale_log2;
  __device__ BlockTile(const E* qkv, const Dims& s, int query_tiles)
      : bh(blockIdx.x),
        b(bh / s.NH),
        h(bh % s.NH),
        t0((query_tiles - 1 - static_cast<int>(blockIdx.y)) * kTile),
        query0(t0 + static_cast<int>(threadIdx.x) / kWarpSize * kStrip),
        last_key_tile((min(t0 + kTile, s.T) - 1) / kTile),
        ld(s.ld_qkv()),
        q_head(qkv + s.head_offset(b, h, ld)),
        scale_log2(s.scale * kLog2e) {}
  // Whether key tile kt needs the mask: some key past the block's first query, or past T. The block's, not the warp's
  // (v7 asks of the warp's first query): v14 takes the masked or the unmasked body per tile, and each holds its own
  // wgmma instructions, which every warp of the warpgroup must execute alike (.aligned; where warps disagree, the
  // behaviour is undefined, and the emulator, which runs each warp's products on their own, would not see it). With
  // 64-row tiles the two questions have the same answer for every warp; asked of the block, that holds by
  // construction.
  __device__ bool masked(int kt, const Dims& s) const {
    return kt * kTile + kTile - 1 > t0 || kt * kTile + kTile > s.T;
  }
};

// ---------------------------------------------------------------- v14: each product waited for at once

// One key tile: S = Q K^T, v7's online softmax for the warp's 16 queries (query0 ..), O += P V. kMasked as in v7.
template <bool kMasked, typename E, int D>
__device__ inline void key_tile(wgmma::Warpgroup& wg, float o[1][D / 8][4], float m[1][2], float l[1][2], const E* q,
                                const E* k, const E* v, int query0, int s0, const Dims& s, float scale_log2) {
  float sc[1][kKeyGroups][4];  // the shapes of online_softmax, one strip of queries a warp
  wg.fence();
  queue_scores<E, D>(wg, sc[0], q, k);
  wg.commit();
  wg.wait<0>();
  wg.fence_operand<kTile>(sc[0]);

  online_softmax<kMasked, D, 1>(sc, o, m, l, query0, s0, s, scale_log2);  // v7's, on the same registers
  uint32_t p[kTile / 16][4];  // P as the A fragments of the 4 k16 steps; live until the products' wait
  pack_probs<E>(p, sc[0]);
  wg.fence();  // o and p were written since the last wait
  queue_probs_times_v<E, D>(wg, o[0], p, v);
  wg.commit();
  wg.wait<0>();
  wg.fence_operand<D>(o[0]);
}

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kBlocks<D>)
    flash_wgmma_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  const SharedTiles<E, D> tiles(shared);
  const BlockTile<E> at(qkv, s, query_tiles);

  issue_core_tile<D>(tiles.q, at.q_head, at.t0, s, at.ld);
  issue_core_tile<D>(tiles.k(0), at.q_head + s.C, 0, s, at.ld);
  issue_core_tile<D>(tiles.v(0), at.q_head + 2 * s.C, 0, s, at.ld);
  __pipeline_commit();

  wgmma::Warpgroup wg;
  float o[1][D / 8][4] = {};
  float m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {{0.0f, 0.0f}};  // rows g and g + 8 of the warp's strip
  for (int kt = 0; kt <= at.last_key_tile; ++kt) {
    const bool next = kt < at.last_key_tile;
    if (next) {  // its buffers were last read at tile kt - 1, before the barrier that ended it
      issue_core_tile<D>(tiles.k(kt + 1), at.q_head + s.C, (kt + 1) * kTile, s, at.ld);
      issue_core_tile<D>(tiles.v(kt + 1), at.q_head + 2 * s.C, (kt + 1) * kTile, s, at.ld);
      __pipeline_commit();
    }
    wait_for_current_tile(next);
    wgmma::fence_shared_writes();  // this thread's copies, visible to the tensor cores
    __syncthreads();               // and every thread's
    const int s0 = kt * kTile;
    if (at.masked(kt, s))
      key_tile<true, E, D>(wg, o, m, l, tiles.q, tiles.k(kt), tiles.v(kt), at.query0, s0, s, at.scale_log2);
    else
      key_tile<false, E, D>(wg, o, m, l, tiles.q, tiles.k(kt), tiles.v(kt), at.query0, s0, s, at.scale_log2);
    __syncthreads();  // every product of tile kt has been waited for: its buffers may be refilled
  }
  store_rows<D>(out, lse, o[0], m[0], l[0], at.query0, at.bh, at.b, at.h, s, at.scale_log2);
}

// ---------------------------------------------------------------- v15: the softmax beside the products

// The softmax of key tile kt's scores (softmax_scores: P left in sc, the output's factor in rescale).
template <typename E>
__device__ inline void tile_softmax(float sc[1][kKeyGroups][4], float rescale[1][2], float m[1][2], float l[1][2],
                                    const BlockTile<E>& at, int kt, const Dims& s, float scale_log2) {
  if (at.masked(kt, s))
    softmax_scores<true, 1>(sc, rescale, m, l, at.query0, kt * kTile, s, scale_log2);
  else
    softmax_scores<false, 1>(sc, rescale, m, l, at.query0, kt * kTile, s, scale_log2);
}

// Iteration kt queues S_kt = Q K_kt^T and then O += P_{kt-1} V_{kt-1}, waits for S_kt only, and computes its softmax
// while the tensor cores still add P_{kt-1} V_{kt-1}; then waits for that product and rescales O. O sees v7's
// operations in v7's order (rescaled by tile kt-1's factor, P_{kt-1} V_{kt-1} added, rescaled by tile kt's), one tile
// later. Copies: batch kt (issued at iteration kt - 1) holds K_kt and V_{kt-1}; at iteration kt, after the barrier,
// K_{kt+1} refills the buffer of K_{kt-1} (its S was waited for at iteration kt - 1) and V_kt that of V_{kt-2} (its
// product was waited for at iteration kt - 1).
template <typename E, int D>
__global__ void __launch_bounds__(kThreads, kOverlappedBlocks<D>)
    flash_wgmma_overlapped_forward_kernel(E* out, float* lse, const E* qkv, Dims s, int query_tiles) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  const SharedTiles<E, D> tiles(shared);
  const BlockTile<E> at(qkv, s, query_tiles);
  const int last = at.last_key_tile;

  // Batch 0: Q and K_0; batch 1: V_0 and K_1.
  issue_core_tile<D>(tiles.q, at.q_head, at.t0, s, at.ld);
  issue_core_tile<D>(tiles.k(0), at.q_head + s.C, 0, s, at.ld);
  __pipeline_commit();
  issue_core_tile<D>(tiles.v(0), at.q_head + 2 * s.C, 0, s, at.ld);
  if (last > 0) issue_core_tile<D>(tiles.k(1), at.q_head + s.C, kTile, s, at.ld);
  __pipeline_commit();
  __pipeline_wait_prior(1);
  wgmma::fence_shared_writes();
  __syncthreads();

  wgmma::Warpgroup wg;
  float o[1][D / 8][4] = {};
  float m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {{0.0f, 0.0f}};
  float rescale[1][2];
  uint32_t p[kTile / 16][4];  // P of the tile whose P V is queued next; read by that product until its wait
  {
    float sc[1][kKeyGroups][4];
    wg.fence();
    queue_scores<E, D>(wg, sc[0], tiles.q, tiles.k(0));
    wg.commit();
    wg.wait<0>();
    wg.fence_operand<kTile>(sc[0]);
    tile_softmax<E>(sc, rescale, m, l, at, 0, s, at.scale_log2);  // O is zero: nothing to rescale
    pack_probs<E>(p, sc[0]);
  }

  for (int kt = 1; kt <= last; ++kt) {
    __pipeline_wait_prior(0);  // batch kt: K_kt and V_{kt-1}
    wgmma::fence_shared_writes();
    __syncthreads();  // every thread's copies have landed, and every thread is past its waits of tile kt - 1
    issue_core_tile<D>(tiles.v(kt), at.q_head + 2 * s.C, kt * kTile, s, at.ld);
    if (kt < last) issue_core_tile<D>(tiles.k(kt + 1), at.q_head + s.C, (kt + 1) * kTile, s, at.ld);
    __pipeline_commit();

    float sc[1][kKeyGroups][4];
    wg.fence_operand<D>(o[0]);  // the writes of o (rescaled) and p (copied) above the fence
    wg.fence_operand(p);
    wg.fence();
    queue_scores<E, D>(wg, sc[0], tiles.q, tiles.k(kt));
    wg.commit();
    queue_probs_times_v<E, D>(wg, o[0], p, tiles.v(kt - 1));
    wg.commit();
    wg.wait<1>();  // S_kt; P_{kt-1} V_{kt-1} may still be running
    wg.fence_operand<kTile>(sc[0]);
    tile_softmax<E>(sc, rescale, m, l, at, kt, s, at.scale_log2);
    uint32_t p_next[kTile / 16][4];
    pack_probs<E>(p_next, sc[0]);
    wg.wait<0>();  // P_{kt-1} V_{kt-1}: o and p are the thread's again
    wg.fence_operand<D>(o[0]);
    wg.fence_operand(p);  // p in its registers until here: p_next may not take them while the product reads them
    rescale_outputs<D, 1>(o, rescale);
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk)
#pragma unroll
      for (int j = 0; j < 4; ++j) p[kk][j] = p_next[kk][j];
  }

  __pipeline_wait_prior(0);  // V_last
  wgmma::fence_shared_writes();
  __syncthreads();
  wg.fence();
  queue_probs_times_v<E, D>(wg, o[0], p, tiles.v(last));
  wg.commit();
  wg.wait<0>();
  wg.fence_operand<D>(o[0]);
  store_rows<D>(out, lse, o[0], m[0], l[0], at.query0, at.bh, at.b, at.h, s, at.scale_log2);
}

}  // namespace

bool flash_wgmma_runs_here() {
#if defined(LAB_CUDA_EMULATION) || defined(LAB_FLASH_WGMMA_SM90A)
  return wgmma::device_runs_sm90a();
#else
  return false;
#endif
}

namespace {

// v14 or v15 (overlapped) for qkv's dtype and head size.
void launch_wgmma_forward(bool overlapped, const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  LAB_CHECK(flash_wgmma_runs_here(), Unsupported,
            "the wgmma flash forward needs a compute capability 9.0 GPU and a build for sm_90a "
            "(90 among CMAKE_CUDA_ARCHITECTURES)");
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    using E = decltype(element);
    constexpr int D = decltype(width)::value;
    if (overlapped)
      launch_forward_tiles<E>("flash_wgmma_overlapped_forward_kernel", flash_wgmma_overlapped_forward_kernel<E, D>,
                              shared_bytes<D>(), out, lse, qkv, s, scope.stream());
    else
      launch_forward_tiles<E>("flash_wgmma_forward_kernel", flash_wgmma_forward_kernel<E, D>, shared_bytes<D>(), out,
                              lse, qkv, s, scope.stream());
  });
}

}  // namespace

void flash_wgmma_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  launch_wgmma_forward(false, out, lse, qkv, n_head);
}

void flash_wgmma_overlapped_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head) {
  launch_wgmma_forward(true, out, lse, qkv, n_head);
}

}  // namespace lab::ch09::attention_lab
