// CUDA conversion of common/ops/convert.h: one thread per element, consecutive threads on consecutive elements
// (coalesced), with the CUDA round-to-nearest-even intrinsics.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/ops/convert.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

__device__ inline void convert_element(__nv_bfloat16& dst, float src) {
  dst = __float2bfloat16_rn(src);
}
__device__ inline void convert_element(__half& dst, float src) {
  dst = __float2half_rn(src);
}
__device__ inline void convert_element(float& dst, __nv_bfloat16 src) {
  dst = __bfloat162float(src);
}
__device__ inline void convert_element(float& dst, __half src) {
  dst = __half2float(src);
}

template <typename Dst, typename Src>
__global__ void convert_kernel(Dst* dst, const Src* src, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  convert_element(dst[i], src[i]);
}

template <typename Dst, typename Src>
void launch_convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (n == 0) return;
  LaunchScope scope(dst);
  LAB_LAUNCH((convert_kernel<Dst, Src>), {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()},
             static_cast<Dst*>(dst.raw()), static_cast<const Src*>(src.raw()), n);
}

}  // namespace

// ---------------------------------------------------------------- launcher

void convert(const Tensor& dst, const Tensor& src) {
  switch (dst.dtype()) {
    case DType::BF16: return launch_convert<__nv_bfloat16, float>(dst, src);
    case DType::F16: return launch_convert<__half, float>(dst, src);
    default:
      if (src.dtype() == DType::BF16) return launch_convert<float, __nv_bfloat16>(dst, src);
      return launch_convert<float, __half>(dst, src);
  }
}

}  // namespace lab::ops::cuda
