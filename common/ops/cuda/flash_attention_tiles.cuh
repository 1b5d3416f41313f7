// The pieces the flash attention kernels share (common/ops/cuda/flash_attention.cu, and the lab versions of
// ch09_advanced/kernels/01_attention): the tile geometry, 16-bit element conversions, shared memory carved into
// aligned pieces, tile loads and strip stores, a query tile's lse and D rows, the D = rowsum(dout * out) pre-pass,
// and the launch helpers.
//
// Geometry: tiles of 64 rows (queries or keys), each warp owning a strip of 16 of them (one fragment high);
// 16-bit rows of a head padded by 8 elements, f32 rows by 4 (WMMA wants leading dimensions in multiples of 16
// bytes; the padding also moves consecutive rows to other shared memory banks).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common/core/error.h"
#include "common/core/memory.h"
#include "common/core/tensor.h"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/flash_attention.h"

namespace lab::ops::cuda::flash {

inline constexpr int kTile = 64;  // queries per query tile = keys per key tile (kFlashQueryTile, kFlashKeyTile)
static_assert(kTile == kFlashQueryTile && kTile == kFlashKeyTile, "the CPU and CUDA versions share their tiles");
inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarpSize;
inline constexpr int kStrip = kTile / kWarps;  // rows per warp: 16, one fragment high
inline constexpr int kHalfCols = kTile / 2;    // a lane's half of a score row
inline constexpr int kLdScores = kTile + 4;    // f32 rows of 64 scores, 272 bytes
inline constexpr int kLdProbs = kTile + 8;     // 16-bit rows of 64 probabilities, 144 bytes
inline constexpr int kMaxHeadSize = 128;
inline constexpr int kWarpRowsPerBlock = kBlockSize / kWarpSize;

template <int D>
inline constexpr int kLdTile = D + 8;  // 16-bit rows of a head: 144 or 272 bytes
template <int D>
inline constexpr int kLdOut = D + 4;  // f32 rows of a head: 272 or 528 bytes

// ---------------------------------------------------------------- element types

__device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ inline float to_float(__half v) {
  return __half2float(v);
}
__device__ inline void store(__nv_bfloat16& dst, float v) {
  dst = __float2bfloat16_rn(v);
}
__device__ inline void store(__half& dst, float v) {
  dst = __float2half_rn(v);
}

// ---------------------------------------------------------------- shared memory

// Bytes of a piece of dynamic shared memory: rounded up to 32, so every piece starts 32-byte aligned (WMMA's rule).
template <typename X>
constexpr size_t piece_bytes(int count) {
  return (static_cast<size_t>(count) * sizeof(X) + 31) / 32 * 32;
}

// Hands out consecutive pieces of the block's dynamic shared memory. Its base is the start of the block's shared
// window (these kernels declare no static shared memory), so the 32-byte rounding of each piece keeps every one
// aligned; the emulation build checks WMMA's alignment at each load and store.
class SharedPieces {
 public:
  __device__ explicit SharedPieces(unsigned char* base) : next_(base) {}
  template <typename X>
  __device__ X* take(int count) {
    X* piece = reinterpret_cast<X*>(next_);
    next_ += piece_bytes<X>(count);
    return piece;
  }

 private:
  unsigned char* next_;
};

// The problem as the kernels see it. Pointers to q, k, v of one head are qkv + b*T*3C + {0, C, 2C} + h*hs.
struct Dims {
  int T, C, NH, hs;
  float scale;
  __device__ int64_t ld_qkv() const { return 3 * static_cast<int64_t>(C); }
  // The first element of head h of batch row b, in a [B,T,C]-shaped tensor (out, dout) or in qkv's q part.
  __device__ int64_t head_offset(int b, int h, int64_t ld) const {
    return static_cast<int64_t>(b) * T * ld + static_cast<int64_t>(h) * hs;
  }
};

// Where element (r, c) of a [64, D] shared tile sits: rows padded to kLdTile<D> elements (the tiles of the
// mma.sync and WMMA kernels; the attention lab's wgmma versions store theirs in core matrices).
template <int D>
struct PaddedRows {
  __device__ int operator()(int r, int c) const { return r * kLdTile<D> + c; }
};

// Rows [first_row, first_row + 64) of one head (row stride ld, `hs` valid columns) into a [64, D] tile of
// shared memory, element (r, c) at offset(r, c); rows past T and columns past hs are zeros, so they add nothing to
// any product. All threads.
template <int D, typename E, typename Offset = PaddedRows<D>>
__device__ void load_tile(E* tile, const E* head, int first_row, const Dims& s, int64_t ld, Offset offset = {}) {
  for (int i = threadIdx.x; i < kTile * D; i += kThreads) {
    const int r = i / D, c = i % D, row = first_row + r;
    E v;
    store(v, 0.0f);
    if (row < s.T && c < s.hs) v = head[row * ld + c];
    tile[offset(r, c)] = v;
  }
}

// dst[row, c] += scale * strip[r, c] for the warp's 16 rows starting at first_row (rows past T skipped),
// rounded to dst's type; lanes stride the columns (coalesced).
template <int D, typename E>
__device__ void add_strip(E* head, int64_t ld, int first_row, const float* strip, float scale, const Dims& s) {
  const int lane = threadIdx.x % kWarpSize;
  for (int r = 0; r < kStrip; ++r) {
    const int row = first_row + r;
    if (row >= s.T) break;
    for (int c = lane; c < s.hs; c += kWarpSize) {
      E& dst = head[row * ld + c];
      store(dst, to_float(dst) + scale * strip[r * kLdOut<D> + c]);
    }
  }
}

// The lse (times lse_scale: 1, or log2 e for kernels that work in base 2) and D of the query tile's 64 rows
// [t0, t0 + 64) of (batch, head) bh into shared memory; zeros past T. All threads.
__device__ inline void load_query_rows(float* tile_lse, float* tile_D, const float* lse, const float* D_rows, int bh,
                                       int t0, const Dims& s, float lse_scale) {
  for (int i = threadIdx.x; i < kTile; i += kThreads) {
    const bool inside = t0 + i < s.T;
    tile_lse[i] = inside ? lse[static_cast<int64_t>(bh) * s.T + t0 + i] * lse_scale : 0.0f;
    tile_D[i] = inside ? D_rows[static_cast<int64_t>(bh) * s.T + t0 + i] : 0.0f;
  }
}

__device__ inline float pair_max(float v) {
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
}
__device__ inline float pair_sum(float v) {
  return v + __shfl_xor_sync(kFullMask, v, 1);
}

// ---------------------------------------------------------------- backward: D = rowsum(dO * O)

// One warp per row (b, t, h); D is [B, NH, T] like lse.
template <typename E>
__global__ void flash_row_dot_kernel(float* D, const E* dout, const E* out, int64_t rows, Dims s) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t bt = r / s.NH;
  const int h = static_cast<int>(r % s.NH);
  const int64_t offset = bt * s.C + static_cast<int64_t>(h) * s.hs;
  float sum = 0.0f;
  for (int c = lane; c < s.hs; c += kWarpSize) sum += to_float(dout[offset + c]) * to_float(out[offset + c]);
  sum = warp_sum(sum);
  const int64_t b = bt / s.T, t = bt % s.T;
  if (lane == 0) D[(b * s.NH + h) * s.T + t] = sum;
}

// The same when a head's row is a power of two of 16-byte pieces, at most 32 (hs = 64 or 128 in 16 bits: 8 or 16):
// `lanes` lanes per row, lane i loading piece i of the row of dout and of out, so that a warp reads 32 consecutive
// pieces (512 bytes) of each with one load where the kernel above reads 64 bytes with a load of 2 bytes a lane.
// (On an H200 that kernel moved about 1 TB/s at GPT-2's shapes: 1.2 ms of a d12 step at B = 32.) The rows of
// [B, T, C] are the heads' rows back to back, row r = (b * T + t) * NH + h at r * hs.
template <typename E>
__global__ void flash_row_dot_pieces_kernel(float* D, const E* dout, const E* out, int64_t rows, int lanes, Dims s) {
  constexpr int kPer = Piece<E>::kElements;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = thread / lanes;
  const int piece = static_cast<int>(thread % lanes);
  float sum = 0.0f;
  if (r < rows) {  // no early return: every lane of the warp takes part in the shuffles below
    const Piece<E> d = reinterpret_cast<const Piece<E>*>(dout)[r * lanes + piece];
    const Piece<E> o = reinterpret_cast<const Piece<E>*>(out)[r * lanes + piece];
#pragma unroll
    for (int e = 0; e < kPer; ++e) sum += to_float(d.e[e]) * to_float(o.e[e]);
  }
  for (int offset = lanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (r < rows && piece == 0) {
    const int64_t bt = r / s.NH, b = bt / s.T, t = bt % s.T;
    D[(b * s.NH + r % s.NH) * s.T + t] = sum;
  }
}

// D for every row of lse's shape, in a workspace tensor queued on `stream` (the backward kernels read it after).
template <typename E>
Tensor flash_row_dots(const Tensor& dout, const Tensor& out, const Tensor& lse, const Dims& s, cudaStream_t stream) {
  const MemoryScope workspace(MemCategory::Workspace);
  const Tensor D_rows = Tensor::empty(lse.shape(), DType::F32, lse.device());
  const int64_t rows = lse.numel();
  const E* d = static_cast<const E*>(dout.raw());
  const E* o = static_cast<const E*>(out.raw());
  const int64_t lanes = pieces_of<E>(s.hs, d, o);
  if (lanes > 0 && lanes <= kWarpSize && (lanes & (lanes - 1)) == 0) {
    LAB_LAUNCH((flash_row_dot_pieces_kernel<E>), {grid_for(rows * lanes, kBlockSize), kBlockSize, 0, stream},
               D_rows.data<float>(), d, o, rows, static_cast<int>(lanes), s);
  } else {
    LAB_LAUNCH((flash_row_dot_kernel<E>), {grid_for(rows, kWarpRowsPerBlock), kBlockSize, 0, stream},
               D_rows.data<float>(), d, o, rows, s);
  }
  return D_rows;
}

// ---------------------------------------------------------------- launch helpers

inline Dims dims_of(const Tensor& qkv, int n_head) {
  const int C = as_blas_int(qkv.dim(2) / 3, "attention width C");
  const int hs = C / n_head;
  return {as_blas_int(qkv.dim(1), "sequence length"), C, n_head, hs, 1.0f / std::sqrt(static_cast<float>(hs))};
}

// The grid of the tile kernels: x runs over (batch, head), y over the tiles of `rows` rows.
inline dim3 tile_grid(const Tensor& qkv, const Dims& s, int rows = kTile) {
  const int64_t bh = qkv.dim(0) * s.NH, tiles = ceil_div(s.T, rows);
  LAB_CHECK(bh <= std::numeric_limits<int32_t>::max() && tiles <= 65535, Unsupported, "flash attention: B*NH = ", bh,
            " and ", tiles, " tiles of ", rows, " do not fit one grid");
  return dim3(static_cast<unsigned int>(bh), static_cast<unsigned int>(tiles));
}

// Raises the kernel's dynamic shared memory limit to `bytes` (above 48 KiB, both builds need it) and launches it.
template <typename Kernel, typename... Args>
void launch_tiles(const char* name, Kernel kernel, dim3 grid, size_t bytes, cudaStream_t stream, Args... args) {
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
  lab::cuda::launch(name, kernel, {grid, dim3(kThreads), bytes, stream}, args...);
}

// A forward tile kernel, kernel(out, lse, qkv, s, query_tiles), over tile_grid with query tiles of `rows`.
template <typename E, typename Kernel>
void launch_forward_tiles(const char* name, Kernel kernel, size_t bytes, const Tensor& out, const Tensor& lse,
                          const Tensor& qkv, const Dims& s, cudaStream_t stream, int rows = kTile) {
  const dim3 grid = tile_grid(qkv, s, rows);
  launch_tiles(name, kernel, grid, bytes, stream, static_cast<E*>(out.raw()), lse.data<float>(),
               static_cast<const E*>(qkv.raw()), s, static_cast<int>(grid.y));
}

// A backward tile kernel (dK/dV or dQ), kernel(dqkv, qkv, dout, lse, D, s, query_tiles, extra...), over tile_grid.
template <typename E, typename Kernel, typename... Extra>
void launch_backward_tiles(const char* name, Kernel kernel, size_t bytes, const Tensor& dqkv, const Tensor& dout,
                           const Tensor& qkv, const Tensor& lse, const Tensor& D_rows, const Dims& s,
                           cudaStream_t stream, Extra... extra) {
  const dim3 grid = tile_grid(qkv, s);
  launch_tiles(name, kernel, grid, bytes, stream, static_cast<E*>(dqkv.raw()), static_cast<const E*>(qkv.raw()),
               static_cast<const E*>(dout.raw()), lse.data<float>(), D_rows.data<float>(), s, static_cast<int>(grid.y),
               extra...);
}

// Calls body(E{}, std::integral_constant<int, D>{}) for the 16-bit element type of `dtype` and the kernels' head
// width D (64 or 128) that holds head size hs.
template <typename Body>
void dispatch_flash(DType dtype, int hs, Body&& body) {
  LAB_CHECK(hs <= kMaxHeadSize, Unsupported, "flash attention on CUDA: head size ", hs, " (at most ", kMaxHeadSize,
            " in 16-bit; f32 takes any)");
  const auto with_width = [&](auto element) {
    if (hs <= 64)
      body(element, std::integral_constant<int, 64>{});
    else
      body(element, std::integral_constant<int, 128>{});
  };
  if (dtype == DType::BF16)
    with_width(__nv_bfloat16{});
  else
    with_width(__half{});
}

}  // namespace lab::ops::cuda::flash
