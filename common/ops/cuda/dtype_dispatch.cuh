// The CUDA side of common/ops/dispatch.h's dispatch on the dtype: the device type of each host storage type
// (Bf16 -> __nv_bfloat16, F16 -> __half) and the loads and stores of a kernel templated on it, which computes in
// fp32 whatever its tensors store.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/core/dtype.h"
#include "common/core/tensor.h"

namespace lab::ops::cuda {

template <typename T>
struct DeviceType {
  using type = T;
};
template <>
struct DeviceType<Bf16> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceType<F16> {
  using type = __half;
};
// The device pointer of a tensor whose host storage type is T.
template <typename T>
typename DeviceType<T>::type* device_data(const Tensor& t) {
  return reinterpret_cast<typename DeviceType<T>::type*>(t.data<T>());
}
// The same, or null for an undefined tensor (an optional output).
template <typename T>
typename DeviceType<T>::type* device_data_or_null(const Tensor& t) {
  return t.defined() ? device_data<T>(t) : nullptr;
}

// 16 bytes of D (8 elements in 16 bits, 4 in f32), loaded and stored whole, in one 16-byte access, and read
// element by element: the kernels of rows or tensors that split into such pieces use it for wide memory accesses.
template <typename D>
struct alignas(16) Piece {
  static constexpr int kElements = 16 / static_cast<int>(sizeof(D));
  D e[kElements];
};

// The number of 16-byte pieces of n elements of D at these pointers, or 0 when they do not split into pieces.
template <typename D, typename... Pointers>
int64_t pieces_of(int64_t n, const Pointers*... pointers) {
  constexpr int64_t kPer = Piece<D>::kElements;
  const bool aligned = ((reinterpret_cast<uintptr_t>(pointers) % 16 == 0) && ...);
  return n % kPer == 0 && aligned ? n / kPer : 0;
}

__device__ inline float load(float v) {
  return v;
}
__device__ inline float load(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ inline float load(__half v) {
  return __half2float(v);
}

template <typename D>
__device__ D store_as(float v);
template <>
__device__ inline float store_as<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 store_as<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ inline __half store_as<__half>(float v) {
  return __float2half_rn(v);
}

}  // namespace lab::ops::cuda
