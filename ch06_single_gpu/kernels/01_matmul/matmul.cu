// The GPU versions of the matmul lab, side by side:  C[M,N] = A[M,K] @ B[K,N], row-major, fp32 unless stated.
//
//   v1 naive               One thread per element of C, a dot product of a row of A and a column of B read
//                          straight from global memory. Threads of a warp share one row of A (a broadcast) and
//                          read consecutive columns of B (coalesced), but every value of A and B is fetched
//                          again by each of the N (or M) threads that need it: 2 loads per FMA, so the kernel
//                          runs at the speed of the L1/L2 caches, far below the FMA units.
//   v2 shared-mem tiled    A block of 32 x 32 threads loads a 32 x 32 tile of A and of B into shared memory
//                          (coalesced: consecutive threads read consecutive addresses), waits (__syncthreads),
//                          and computes 32 partial products per thread from shared memory. Each global value is
//                          now read once per block instead of once per thread: 32 times fewer global loads. Still
//                          2 shared-memory loads per FMA.
//   v3 register blocked    Each block computes a 128 x 128 tile of C, each of its 256 threads an 8 x 8 micro-tile
//                          kept in registers. Per step of k, a thread loads 8 values of A and 8 of B from shared
//                          memory and does 64 FMAs: 4 FMAs per load instead of 1/2.
//   v4 vectorised          v3, with A's tile stored transposed in shared memory so that a thread's 8 values of A
//                          are contiguous, like its 8 of B: 128-bit (float4) loads from shared memory, and float4
//                          loads and stores in global memory: a quarter of the load instructions. The float4 path
//                          needs rows that start 16-byte aligned (K and N multiples of 4); other shapes take the
//                          same kernel with scalar loads.
//   v5 tensor cores        bf16 A and B, fp32 accumulation, through WMMA (nvcuda::wmma): each warp computes a
//                          32 x 32 tile of C as 2 x 2 fragments of 16 x 16, one mma_sync per 16 x 16 x 16 product,
//                          from 64 x 32 and 32 x 64 tiles staged in shared memory; C is staged in shared memory too
//                          so that the edges of C can be written with bounds checks.
//   cuBLAS                 cublasSgemm, strict fp32 or TF32 tensor-core math: the ceiling for fp32.
//
// Every kernel handles any M, N, K: tiles that stick out of the matrices read zeros and write nothing.
#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>

#include "ch06_single_gpu/kernels/01_matmul/matmul_versions.h"
#include "common/cuda/cublas.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::matmul {

using ops::cuda::ceil_div;
using ops::cuda::LaunchScope;

namespace {

// ---------------------------------------------------------------- v1: naive

constexpr int kNaiveBlockX = 32, kNaiveBlockY = 8;

__global__ void matmul_naive_kernel(float* c, const float* a, const float* b, int M, int N, int K) {
  // x runs along the columns of C: a warp reads 32 consecutive values of a row of B and writes 32 of C.
  const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += a[row * K + k] * b[k * N + col];
  c[row * N + col] = sum;
}

// ---------------------------------------------------------------- v2: shared-memory tiles

constexpr int kTile = 32;

__global__ void matmul_smem_tiled_kernel(float* c, const float* a, const float* b, int M, int N, int K) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int row = static_cast<int>(blockIdx.y) * kTile + ty;
  const int col = static_cast<int>(blockIdx.x) * kTile + tx;
  float sum = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kTile) {
    // Every thread loads one element of each tile (zero outside the matrices), even a thread whose own
    // element of C is outside: the tile is shared, and every thread must reach the barriers.
    a_tile[ty][tx] = row < M && k0 + tx < K ? a[row * K + k0 + tx] : 0.0f;
    b_tile[ty][tx] = k0 + ty < K && col < N ? b[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  // the tiles are complete
    for (int k = 0; k < kTile; ++k) sum += a_tile[ty][k] * b_tile[k][tx];
    __syncthreads();  // everyone is done with the tiles before the next ones overwrite them
  }
  if (row < M && col < N) c[row * N + col] = sum;
}

// ---------------------------------------------------------------- v3 and v4: register blocking

// A block computes a kBlockM x kBlockN tile of C, stepping through K kBlockK at a time; each of its
// (kBlockM / kThreadM) * (kBlockN / kThreadN) = 256 threads computes a kThreadM x kThreadN micro-tile.
constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8, kThreadM = 8, kThreadN = 8;
constexpr int kBlockedThreads = (kBlockM / kThreadM) * (kBlockN / kThreadN);
static_assert(kThreadM == 8 && kThreadN == 8, "v4 loads a thread's 8 values of A and of B as two float4 each");
static_assert(kBlockedThreads == 256 && kBlockM * kBlockK == 4 * kBlockedThreads &&
                  kBlockK * kBlockN == 4 * kBlockedThreads,
              "each thread loads 4 values of A's tile and 4 of B's per step");

__global__ void __launch_bounds__(kBlockedThreads)
    matmul_register_blocked_kernel(float* c, const float* a, const float* b, int M, int N, int K) {
  __shared__ float a_tile[kBlockM][kBlockK];
  __shared__ float b_tile[kBlockK][kBlockN];
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * kBlockM, col0 = static_cast<int>(blockIdx.x) * kBlockN;
  const int micro_row = t / (kBlockN / kThreadN) * kThreadM, micro_col = t % (kBlockN / kThreadN) * kThreadN;
  float acc[kThreadM][kThreadN] = {};
  float a_reg[kThreadM], b_reg[kThreadN];
  for (int k0 = 0; k0 < K; k0 += kBlockK) {
    // 4 loads per thread and tile; consecutive threads read consecutive addresses of a row.
    for (int i = t; i < kBlockM * kBlockK; i += kBlockedThreads) {
      const int r = i / kBlockK, k = i % kBlockK;
      a_tile[r][k] = row0 + r < M && k0 + k < K ? a[(row0 + r) * K + k0 + k] : 0.0f;
    }
    for (int i = t; i < kBlockK * kBlockN; i += kBlockedThreads) {
      const int k = i / kBlockN, col = i % kBlockN;
      b_tile[k][col] = k0 + k < K && col0 + col < N ? b[(k0 + k) * N + col0 + col] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < kBlockK; ++k) {
      for (int i = 0; i < kThreadM; ++i) a_reg[i] = a_tile[micro_row + i][k];
      for (int j = 0; j < kThreadN; ++j) b_reg[j] = b_tile[k][micro_col + j];
      for (int i = 0; i < kThreadM; ++i)
        for (int j = 0; j < kThreadN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < kThreadM; ++i)
    for (int j = 0; j < kThreadN; ++j) {
      const int row = row0 + micro_row + i, col = col0 + micro_col + j;
      if (row < M && col < N) c[row * N + col] = acc[i][j];
    }
}

// Four consecutive values of a row of a rows x cols matrix from (row, col), zero where outside: one 128-bit
// load when the rows are 16-byte aligned (then a group of 4 is either wholly inside or wholly outside),
// else four scalar loads.
template <bool kVector>
__device__ __forceinline__ float4 load4(const float* m, int rows, int cols, int row, int col) {
  if constexpr (kVector) {
    if (row < rows && col < cols) return *reinterpret_cast<const float4*>(m + row * cols + col);
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  } else {
    float v[4];
    for (int i = 0; i < 4; ++i) v[i] = row < rows && col + i < cols ? m[row * cols + col + i] : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

template <bool kVector>
__global__ void __launch_bounds__(kBlockedThreads)
    matmul_vectorized_kernel(float* c, const float* a, const float* b, int M, int N, int K) {
  // A's tile transposed ([k][m]): a thread's 8 values of A for one k are then contiguous, as its 8 of B are.
  __align__(16) __shared__ float a_tile_t[kBlockK][kBlockM];
  __align__(16) __shared__ float b_tile[kBlockK][kBlockN];
  const int t = static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * kBlockM, col0 = static_cast<int>(blockIdx.x) * kBlockN;
  const int micro_row = t / (kBlockN / kThreadN) * kThreadM, micro_col = t % (kBlockN / kThreadN) * kThreadN;
  // One float4 of A's tile per thread (a row of the tile is kBlockK = 8 values: two float4), one of B's.
  const int a_row = t / (kBlockK / 4), a_col = t % (kBlockK / 4) * 4;
  const int b_row = t / (kBlockN / 4), b_col = t % (kBlockN / 4) * 4;
  float acc[kThreadM][kThreadN] = {};
  for (int k0 = 0; k0 < K; k0 += kBlockK) {
    const float4 av = load4<kVector>(a, M, K, row0 + a_row, k0 + a_col);
    a_tile_t[a_col + 0][a_row] = av.x;
    a_tile_t[a_col + 1][a_row] = av.y;
    a_tile_t[a_col + 2][a_row] = av.z;
    a_tile_t[a_col + 3][a_row] = av.w;
    *reinterpret_cast<float4*>(&b_tile[b_row][b_col]) = load4<kVector>(b, K, N, k0 + b_row, col0 + b_col);
    __syncthreads();
    for (int k = 0; k < kBlockK; ++k) {
      // A thread's 8 values of A and 8 of B: two 128-bit shared-memory loads each.
      const float4 a_lo = *reinterpret_cast<const float4*>(&a_tile_t[k][micro_row]);
      const float4 a_hi = *reinterpret_cast<const float4*>(&a_tile_t[k][micro_row + 4]);
      const float4 b_lo = *reinterpret_cast<const float4*>(&b_tile[k][micro_col]);
      const float4 b_hi = *reinterpret_cast<const float4*>(&b_tile[k][micro_col + 4]);
      const float a_reg[kThreadM] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float b_reg[kThreadN] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
      for (int i = 0; i < kThreadM; ++i)
        for (int j = 0; j < kThreadN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < kThreadM; ++i) {
    const int row = row0 + micro_row + i;
    if (row >= M) break;
    for (int j = 0; j < kThreadN; j += 4) {
      const int col = col0 + micro_col + j;
      if (kVector && col < N) {
        *reinterpret_cast<float4*>(&c[row * N + col]) =
            make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
      } else if (!kVector) {
        for (int jj = 0; jj < 4; ++jj)
          if (col + jj < N) c[row * N + col + jj] = acc[i][j + jj];
      }
    }
  }
}

// ---------------------------------------------------------------- v5: tensor cores (WMMA, bf16)

namespace wmma = nvcuda::wmma;

// A block of 4 warps (2 x 2) computes a 64 x 64 tile of C; each warp a 32 x 32 quarter as 2 x 2 fragments.
constexpr int kWmmaTile = 16;  // m = n = k of one mma_sync
constexpr int kWmmaBlockM = 64, kWmmaBlockN = 64, kWmmaBlockK = 32, kWmmaWarps = 4;
constexpr int kWmmaThreads = kWmmaWarps * 32;
constexpr int kWarpFragments = 2;  // per warp: 2 x 2 fragments of 16 x 16
// Rows of the shared tiles are padded (still multiples of 16 bytes, as WMMA needs) so that the rows a warp
// loads do not all start in the same shared-memory bank.
constexpr int kAStride = kWmmaBlockK + 8, kBStride = kWmmaBlockN + 8, kCStride = kWmmaBlockN + 4;

__global__ void __launch_bounds__(kWmmaThreads)
    matmul_wmma_bf16_kernel(float* c, const __nv_bfloat16* a, const __nv_bfloat16* b, int M, int N, int K) {
  // WMMA loads and stores need 256-bit aligned addresses: each fragment starts at a multiple of 32 bytes.
  __align__(32) __shared__ __nv_bfloat16 a_tile[kWmmaBlockM][kAStride];
  __align__(32) __shared__ __nv_bfloat16 b_tile[kWmmaBlockK][kBStride];
  __align__(32) __shared__ float c_tile[kWmmaBlockM][kCStride];
  const int t = static_cast<int>(threadIdx.x), warp = t / 32;
  const int row0 = static_cast<int>(blockIdx.y) * kWmmaBlockM, col0 = static_cast<int>(blockIdx.x) * kWmmaBlockN;
  const int warp_row = warp / 2 * (kWarpFragments * kWmmaTile), warp_col = warp % 2 * (kWarpFragments * kWmmaTile);

  wmma::fragment<wmma::accumulator, kWmmaTile, kWmmaTile, kWmmaTile, float> acc[kWarpFragments][kWarpFragments];
  for (auto& row : acc)
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  wmma::fragment<wmma::matrix_a, kWmmaTile, kWmmaTile, kWmmaTile, __nv_bfloat16, wmma::row_major>
      a_frag[kWarpFragments];
  wmma::fragment<wmma::matrix_b, kWmmaTile, kWmmaTile, kWmmaTile, __nv_bfloat16, wmma::row_major>
      b_frag[kWarpFragments];

  const __nv_bfloat16 zero = __float2bfloat16(0.0f);
  for (int k0 = 0; k0 < K; k0 += kWmmaBlockK) {
    for (int i = t; i < kWmmaBlockM * kWmmaBlockK; i += kWmmaThreads) {
      const int r = i / kWmmaBlockK, k = i % kWmmaBlockK;
      a_tile[r][k] = row0 + r < M && k0 + k < K ? a[(row0 + r) * K + k0 + k] : zero;
    }
    for (int i = t; i < kWmmaBlockK * kWmmaBlockN; i += kWmmaThreads) {
      const int k = i / kWmmaBlockN, col = i % kWmmaBlockN;
      b_tile[k][col] = k0 + k < K && col0 + col < N ? b[(k0 + k) * N + col0 + col] : zero;
    }
    __syncthreads();
    for (int k = 0; k < kWmmaBlockK; k += kWmmaTile) {
      for (int f = 0; f < kWarpFragments; ++f) {
        wmma::load_matrix_sync(a_frag[f], &a_tile[warp_row + f * kWmmaTile][k], kAStride);
        wmma::load_matrix_sync(b_frag[f], &b_tile[k][warp_col + f * kWmmaTile], kBStride);
      }
      for (int i = 0; i < kWarpFragments; ++i)
        for (int j = 0; j < kWarpFragments; ++j) wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Through shared memory, so that only the elements inside C are written.
  for (int i = 0; i < kWarpFragments; ++i)
    for (int j = 0; j < kWarpFragments; ++j)
      wmma::store_matrix_sync(&c_tile[warp_row + i * kWmmaTile][warp_col + j * kWmmaTile], acc[i][j], kCStride,
                              wmma::mem_row_major);
  __syncthreads();
  for (int i = t; i < kWmmaBlockM * kWmmaBlockN; i += kWmmaThreads) {
    const int r = i / kWmmaBlockN, col = i % kWmmaBlockN;
    if (row0 + r < M && col0 + col < N) c[(row0 + r) * N + col0 + col] = c_tile[r][col];
  }
}

// ---------------------------------------------------------------- launch helpers

// The sizes as the kernels' 32-bit ints (every index below M*K, K*N, M*N must fit one).
struct IntDims {
  int M, N, K;
};

IntDims int_dims(const Dims& d, const char* version) {
  constexpr int64_t kMax = int64_t{1} << 31;
  LAB_CHECK(d.M * d.K < kMax && d.K * d.N < kMax && d.M * d.N < kMax, Unsupported, version, ": ", d.M, " x ", d.K,
            " @ ", d.K, " x ", d.N, " has a matrix of 2^31 elements or more (the kernels index with 32-bit ints)");
  return {static_cast<int>(d.M), static_cast<int>(d.N), static_cast<int>(d.K)};
}

unsigned grid_dim(int64_t n, int tile) {
  return static_cast<unsigned>(ceil_div(n, tile));
}

const __nv_bfloat16* bf16_data(const Tensor& t) {
  return static_cast<const __nv_bfloat16*>(t.raw());
}

// Zero K: every version writes zeros (the empty sum).
bool empty_product(const Tensor& c, const Dims& d) {
  if (d.M == 0 || d.N == 0) return true;
  if (d.K > 0) return false;
  c.zero_();
  return true;
}

}  // namespace

// ---------------------------------------------------------------- launchers

void gpu_naive(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul naive");
  if (empty_product(c, d)) return;
  const IntDims n = int_dims(d, "matmul naive");
  LaunchScope scope(c);
  LAB_LAUNCH(matmul_naive_kernel,
             {dim3(grid_dim(d.N, kNaiveBlockX), grid_dim(d.M, kNaiveBlockY)), dim3(kNaiveBlockX, kNaiveBlockY), 0,
              scope.stream()},
             c.data<float>(), a.data<float>(), b.data<float>(), n.M, n.N, n.K);
}

void gpu_smem_tiled(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul shared-memory tiled");
  if (empty_product(c, d)) return;
  const IntDims n = int_dims(d, "matmul shared-memory tiled");
  LaunchScope scope(c);
  LAB_LAUNCH(matmul_smem_tiled_kernel,
             {dim3(grid_dim(d.N, kTile), grid_dim(d.M, kTile)), dim3(kTile, kTile), 0, scope.stream()}, c.data<float>(),
             a.data<float>(), b.data<float>(), n.M, n.N, n.K);
}

void gpu_register_blocked(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul register blocked");
  if (empty_product(c, d)) return;
  const IntDims n = int_dims(d, "matmul register blocked");
  LaunchScope scope(c);
  LAB_LAUNCH(matmul_register_blocked_kernel,
             {dim3(grid_dim(d.N, kBlockN), grid_dim(d.M, kBlockM)), dim3(kBlockedThreads), 0, scope.stream()},
             c.data<float>(), a.data<float>(), b.data<float>(), n.M, n.N, n.K);
}

void gpu_vectorized(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul vectorised");
  if (empty_product(c, d)) return;
  const IntDims n = int_dims(d, "matmul vectorised");
  // float4 accesses need every row of A, B and C to start on a 16-byte boundary.
  const auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()) % 16 == 0; };
  const bool vector = d.K % 4 == 0 && d.N % 4 == 0 && aligned(a) && aligned(b) && aligned(c);
  LaunchScope scope(c);
  const lab::cuda::LaunchConfig config{dim3(grid_dim(d.N, kBlockN), grid_dim(d.M, kBlockM)), dim3(kBlockedThreads), 0,
                                       scope.stream()};
  if (vector) {
    LAB_LAUNCH((matmul_vectorized_kernel<true>), config, c.data<float>(), a.data<float>(), b.data<float>(), n.M, n.N,
               n.K);
  } else {
    LAB_LAUNCH((matmul_vectorized_kernel<false>), config, c.data<float>(), a.data<float>(), b.data<float>(), n.M, n.N,
               n.K);
  }
}

void gpu_wmma_bf16(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::BF16, "matmul tensor cores (WMMA)");
  if (empty_product(c, d)) return;
  const IntDims n = int_dims(d, "matmul tensor cores (WMMA)");
  LaunchScope scope(c);
  LAB_LAUNCH(matmul_wmma_bf16_kernel,
             {dim3(grid_dim(d.N, kWmmaBlockN), grid_dim(d.M, kWmmaBlockM)), dim3(kWmmaThreads), 0, scope.stream()},
             c.data<float>(), bf16_data(a), bf16_data(b), n.M, n.N, n.K);
}

// cuBLAS is column-major: the row-major C = A B is the column-major C^T = B^T A^T, with the operands swapped.
void gpu_cublas_sgemm(const Tensor& c, const Tensor& a, const Tensor& b, bool tf32) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul cuBLAS");
  if (d.M == 0 || d.N == 0) return;
  const int M = ops::cuda::as_blas_int(d.M, "M"), N = ops::cuda::as_blas_int(d.N, "N");
  const int K = ops::cuda::as_blas_int(d.K, "K");
  LaunchScope scope(c);
  // The math mode is process-wide (common/cuda/cublas.h): switch it for this call only.
  const bool was_tf32 = lab::cuda::tf32_enabled();
  lab::cuda::set_tf32(tf32);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasSgemm(lab::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b.data<float>(), N,
                  a.data<float>(), std::max(K, 1), &beta, c.data<float>(), N);
  lab::cuda::set_tf32(was_tf32);
  CUBLAS_CHECK(status);
}

}  // namespace lab::ch06::matmul
