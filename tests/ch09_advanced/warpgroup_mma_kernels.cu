// The kernel of warpgroup_mma_kernels.h: one block of one warpgroup (128 threads).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "common/core/error.h"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"
#include "common/ops/cuda/warpgroup_mma.cuh"
#include "tests/ch09_advanced/warpgroup_mma_kernels.h"

namespace lab::test {

namespace {

namespace mma = ops::cuda::mma;
namespace wgmma = ops::cuda::wgmma;
using wgmma::BMajor;

constexpr int kM = 64, kK = 16;

// Byte offsets of the layout without swizzling (warpgroup_mma.cuh): K-major (row, k), MN-major (k, n).
__device__ inline uint32_t k_major(int row, int k, uint32_t leading, uint32_t stride) {
  return (row % 8) * 16 + (row / 8) * stride + (k % 8) * 2 + (k / 8) * leading;
}
__device__ inline uint32_t mn_major(int k, int n, uint32_t leading, uint32_t stride) {
  return (n % 8) * 2 + (n / 8) * stride + (k % 8) * 16 + (k / 8) * leading;
}

// Rows of the accumulator a lane holds: warp w of the warpgroup, register i of n8 block j.
__device__ inline int d_row(int i) {
  return threadIdx.x / 32 * 16 + threadIdx.x % 32 / 4 + (i / 2) * 8;
}
__device__ inline int d_col(int j, int i) {
  return j * 8 + 2 * (threadIdx.x % 4) + i % 2;
}

template <typename E, int N, BMajor kB>
__global__ void warpgroup_product_kernel(float* d, const E* a, const E* b, const float* c, WarpgroupOperands how,
                                         uint32_t b_offset) {
  LAB_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* a_shared = shared;
  unsigned char* b_shared = shared + b_offset;
  for (int i = threadIdx.x; i < kM * kK; i += blockDim.x)
    *reinterpret_cast<E*>(a_shared + k_major(i / kK, i % kK, how.a_leading, how.a_stride)) = a[i];
  for (int i = threadIdx.x; i < kK * N; i += blockDim.x) {
    const int k = i / N, n = i % N;
    const uint32_t at =
        kB == BMajor::N ? mn_major(k, n, how.b_leading, how.b_stride) : k_major(n, k, how.b_leading, how.b_stride);
    *reinterpret_cast<E*>(b_shared + at) = b[i];
  }
  wgmma::fence_shared_writes();
  __syncthreads();

  float acc[N / 8][4];
  for (int j = 0; j < N / 8; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = how.accumulate ? c[d_row(i) * N + d_col(j, i)] : 1e30f;
  // The A fragment of warp w, as mma.sync's: rows 16 w + g and + 8, columns 2 t, 2 t + 1 and + 8.
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, row0 = threadIdx.x / 32 * 16;
  const auto pair = [&](int row, int col) {
    return mma::pack<E>(mma::to_float(a[row * kK + col]), mma::to_float(a[row * kK + col + 1]));
  };
  const uint32_t a_frag[4] = {pair(row0 + g, 2 * t), pair(row0 + g + 8, 2 * t), pair(row0 + g, 2 * t + 8),
                              pair(row0 + g + 8, 2 * t + 8)};
  const uint64_t desc_b = wgmma::descriptor(b_shared, how.b_leading, how.b_stride);
  wgmma::Warpgroup wg;
  wg.fence();
  if (how.a_in_registers)
    wg.mma_registers_a<E, N, kB>(acc, a_frag, desc_b, how.accumulate);
  else
    wg.mma_shared_a<E, N, kB>(acc, wgmma::descriptor(a_shared, how.a_leading, how.a_stride), desc_b, how.accumulate);
  wg.commit();
  wg.wait<0>();
  wg.fence_operand<N>(acc);
  for (int j = 0; j < N / 8; ++j)
    for (int i = 0; i < 4; ++i) d[d_row(i) * N + d_col(j, i)] = acc[j][i];
}

// The bytes an operand spans: its farthest element's offset + 2, rounded up to 16.
uint32_t span(int rows_of_8, int groups_of_8, uint32_t leading, uint32_t stride) {
  return ((rows_of_8 - 1) * stride + (groups_of_8 - 1) * leading + 7 * 16 + 7 * 2 + 2 + 15) / 16 * 16;
}

template <typename E, int N, BMajor kB>
void launch_product(const Tensor& d, const Tensor& a, const Tensor& b, const Tensor& c, const WarpgroupOperands& how,
                    cudaStream_t stream) {
  const uint32_t a_bytes = span(kM / 8, kK / 8, how.a_leading, how.a_stride);
  const uint32_t b_bytes = span(N / 8, kK / 8, how.b_leading, how.b_stride);  // N by the stride, K by the leading
  const size_t bytes = a_bytes + b_bytes;
  const auto kernel = warpgroup_product_kernel<E, N, kB>;
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)));
  LAB_LAUNCH(kernel, {1, wgmma::kWarpgroupThreads, bytes, stream}, d.data<float>(), static_cast<const E*>(a.raw()),
             static_cast<const E*>(b.raw()), c.data<float>(), how, a_bytes);
}

}  // namespace

bool warpgroup_products_run_here() {
#if defined(LAB_CUDA_EMULATION) || defined(LAB_WGMMA_SM90A)
  return wgmma::device_runs_sm90a();
#else
  return false;
#endif
}

void warpgroup_product(const Tensor& d, const Tensor& a, const Tensor& b, const Tensor& c,
                       const WarpgroupOperands& how) {
  const int64_t n = d.dim(1);
  LAB_CHECK(d.dtype() == DType::F32 && d.dim(0) == kM && (n == 64 || n == 128) && c.numel() == d.numel() &&
                a.numel() == kM * kK && b.numel() == kK * n && a.dtype() == b.dtype() &&
                (a.dtype() == DType::BF16 || a.dtype() == DType::F16),
            InvalidArgument, "warpgroup product: f32 d and c [64, 64 or 128], 16-bit a [64, 16] and b [16, N]");
  ops::cuda::LaunchScope scope(d);
  const auto with = [&](auto element) {
    using E = decltype(element);
    if (n == 64)
      how.b_n_major ? launch_product<E, 64, BMajor::N>(d, a, b, c, how, scope.stream())
                    : launch_product<E, 64, BMajor::K>(d, a, b, c, how, scope.stream());
    else
      how.b_n_major ? launch_product<E, 128, BMajor::N>(d, a, b, c, how, scope.stream())
                    : launch_product<E, 128, BMajor::K>(d, a, b, c, how, scope.stream());
  };
  if (a.dtype() == DType::BF16)
    with(__nv_bfloat16{});
  else
    with(__half{});
}

}  // namespace lab::test
