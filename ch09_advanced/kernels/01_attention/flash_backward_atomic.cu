// v5 of the attention lab: the flash backward in one pass, dQ by atomics (see flash_versions.h).
//
// The core's backward (common/ops/cuda/flash_attention.cu) walks the key tiles for dK and dV, then walks the
// query tiles a second time for dQ, recomputing S and dP: 7 tile products per pair of tiles. Here the key-tile
// blocks also produce dQ's share of each pair, dS K, and add it into an f32 copy of dQ with atomicAdd, since every
// key tile adds into the same rows of dQ: 5 tile products per pair, one pass over the tiles, at the price of
// an f32 [B, T, C] workspace, atomics (whose order, and so whose rounding, changes from run to run), and a last
// elementwise kernel that adds the workspace into dqkv in its dtype.
//
// The kernel is the core's dK/dV kernel plus, once a pair's dS^T is in shared memory (all four warps' strips,
// hence a barrier), each warp's 16 queries of dQ = dS K: A is dS, read column-major from dS^T.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "ch09_advanced/kernels/01_attention/flash_versions.h"
#include "common/core/memory.h"
#include "common/ops/cuda/flash_attention_mma.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch09::attention_lab {

namespace {

using namespace ops::cuda::flash;  // the pieces the flash kernels share (flash_attention_tiles.cuh)
using ops::cuda::kBlockSize;
using ops::cuda::kWarpSize;

// K, V, Q, dO tiles; S^T and dP^T; P^T and dS^T; dK and dV; lse and D of the query tile; the warps' dQ strips.
// 219.5 KiB at head size 128: just under the 227 KiB a block may have.
template <int D>
constexpr size_t key_grads_atomic_shared_bytes() {
  return 4 * piece_bytes<uint16_t>(kTile * kLdTile<D>) + 2 * piece_bytes<float>(kTile * kLdScores) +
         2 * piece_bytes<uint16_t>(kTile * kLdProbs) + 3 * piece_bytes<float>(kTile * kLdOut<D>) +
         2 * piece_bytes<float>(kTile);
}

// ---------------------------------------------------------------- kernels

template <typename E, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_key_grads_atomic_kernel(E* dqkv, float* dq_sum, const E* qkv, const E* dout, const float* lse,
                                  const float* D_rows, Dims s, int query_tiles) {
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
  float* dq = pieces.take<float>(kTile * kLdOut<D>);  // this pair's dS K, the warps' 16-query strips
  float* tile_lse = pieces.take<float>(kTile);
  float* tile_D = pieces.take<float>(kTile);

  const int bh = blockIdx.x, b = bh / s.NH, h = bh % s.NH;
  const int s0 = static_cast<int>(blockIdx.y) * kTile;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int strip = warp * kStrip, row = lane / 2, half = lane % 2;
  const int key = s0 + strip + row;
  const int64_t ld = s.ld_qkv();
  const int64_t head = s.head_offset(b, h, ld);
  const E* dout_head = dout + s.head_offset(b, h, s.C);
  float* dq_head = dq_sum + s.head_offset(b, h, s.C);

  load_tile<D>(k, qkv + head + s.C, s0, s, ld);
  load_tile<D>(v, qkv + head + 2 * s.C, s0, s, ld);
  for (int i = threadIdx.x; i < kTile * kLdOut<D>; i += kThreads) dk[i] = dv[i] = 0.0f;

  for (int qt = s0 / kTile; qt < query_tiles; ++qt) {
    const int t0 = qt * kTile;
    __syncthreads();  // every warp is done with the previous Q, dO, lse, D and dS^T
    load_tile<D>(q, qkv + head, t0, s, ld);
    load_tile<D>(dO, dout_head, t0, s, s.C);
    load_query_rows(tile_lse, tile_D, lse, D_rows, bh, t0, s, 1.0f);
    __syncthreads();

    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        st + strip * kLdScores, kLdScores, k + strip * kLdTile<D>, kLdTile<D>, q, kLdTile<D>, false);
    warp_matmul_16xN<kTile, D, Layout::RowMajor, Layout::Transposed>(
        dpt + strip * kLdScores, kLdScores, v + strip * kLdTile<D>, kLdTile<D>, dO, kLdTile<D>, false);
    __syncwarp();
    for (int c = half * kHalfCols; c < (half + 1) * kHalfCols; ++c) {
      const int query = t0 + c;
      const int at = (strip + row) * kLdScores + c;
      const float p = query >= key && query < s.T ? expf(st[at] * s.scale - tile_lse[c]) : 0.0f;
      store(pt[(strip + row) * kLdProbs + c], p);
      store(dst[(strip + row) * kLdProbs + c], p * (dpt[at] - tile_D[c]));
    }
    __syncthreads();  // dS^T complete: each warp reads every warp's keys for its queries

    // dQ[16 queries of the warp] = dS K, with dS read column-major from dS^T; added into the f32 sum.
    warp_matmul_16xN<D, kTile, Layout::Transposed, Layout::RowMajor>(dq + strip * kLdOut<D>, kLdOut<D>, dst + strip,
                                                                     kLdProbs, k, kLdTile<D>, false);
    __syncwarp();
    for (int r = 0; r < kStrip; ++r) {
      const int query = t0 + strip + r;
      if (query >= s.T) break;
      for (int c = lane; c < s.hs; c += kWarpSize)
        atomicAdd(&dq_head[static_cast<int64_t>(query) * s.C + c], s.scale * dq[(strip + r) * kLdOut<D> + c]);
    }

    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        dv + strip * kLdOut<D>, kLdOut<D>, pt + strip * kLdProbs, kLdProbs, dO, kLdTile<D>, true);
    warp_matmul_16xN<D, kTile, Layout::RowMajor, Layout::RowMajor>(
        dk + strip * kLdOut<D>, kLdOut<D>, dst + strip * kLdProbs, kLdProbs, q, kLdTile<D>, true);
  }
  __syncwarp();
  add_strip<D>(dqkv + head + s.C, ld, s0 + strip, dk + strip * kLdOut<D>, s.scale, s);
  add_strip<D>(dqkv + head + 2 * s.C, ld, s0 + strip, dv + strip * kLdOut<D>, 1.0f, s);
}

// dqkv's q part += dq_sum, rounded to E: one thread per element of [B, T, C].
template <typename E>
__global__ void flash_add_dq_kernel(E* dqkv, const float* dq_sum, int64_t n, int C) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  E& dst = dqkv[i / C * 3 * C + i % C];
  store(dst, to_float(dst) + dq_sum[i]);
}

template <typename E, int D>
void backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
              const Dims& s, cudaStream_t stream) {
  const Tensor D_rows = flash_row_dots<E>(dout, out, lse, s, stream);
  const MemoryScope workspace(MemCategory::Workspace);
  const Tensor dq_sum = Tensor::zeros(out.shape(), DType::F32, out.device());
  const dim3 grid = tile_grid(qkv, s);
  launch_tiles("flash_key_grads_atomic_kernel", flash_key_grads_atomic_kernel<E, D>, grid,
               key_grads_atomic_shared_bytes<D>(), stream, static_cast<E*>(dqkv.raw()), dq_sum.data<float>(),
               static_cast<const E*>(qkv.raw()), static_cast<const E*>(dout.raw()), lse.data<float>(),
               D_rows.data<float>(), s, static_cast<int>(grid.y));
  const int64_t n = out.numel();
  LAB_LAUNCH((flash_add_dq_kernel<E>), {ops::cuda::grid_for(n, kBlockSize), kBlockSize, 0, stream},
             static_cast<E*>(dqkv.raw()), dq_sum.data<float>(), n, s.C);
}

}  // namespace

void flash_backward_atomic_dq(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head) {
  LAB_CHECK(qkv.dtype() == DType::BF16 || qkv.dtype() == DType::F16, Unsupported,
            "the atomic-dQ flash backward takes bf16 or f16, not ", dtype_name(qkv.dtype()));
  if (qkv.numel() == 0) return;
  const Dims s = dims_of(qkv, n_head);
  ops::cuda::LaunchScope scope(qkv);
  dispatch_flash(qkv.dtype(), s.hs, [&](auto element, auto width) {
    backward<decltype(element), decltype(width)::value>(dqkv, dout, qkv, out, lse, s, scope.stream());
  });
}

}  // namespace lab::ch09::attention_lab
