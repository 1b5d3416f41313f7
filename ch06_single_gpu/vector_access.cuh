// Loads and stores of kVec consecutive elements as one memory access: kVec = 4 moves four floats as one float4
// (16 bytes) or four bf16 values as one uint2 (8 bytes); kVec = 1 is the scalar access, for layouts that are not
// aligned to a whole vector. Kernels that are templates on kVec pick the instance on the host, after checking
// the alignment, and read the same code either way. bf16 travels as its 16 bits (uint16_t).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lab::ch06::cuda {

__device__ inline void load_vector(const float* p, float (&x)[1]) {
  x[0] = *p;
}
__device__ inline void load_vector(const float* p, float (&x)[4]) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  x[0] = q.x;
  x[1] = q.y;
  x[2] = q.z;
  x[3] = q.w;
}
__device__ inline void store_vector(float* p, const float (&x)[1]) {
  *p = x[0];
}
__device__ inline void store_vector(float* p, const float (&x)[4]) {
  *reinterpret_cast<float4*>(p) = make_float4(x[0], x[1], x[2], x[3]);
}

__device__ inline void load_vector(const uint16_t* p, uint16_t (&x)[1]) {
  x[0] = *p;
}
__device__ inline void load_vector(const uint16_t* p, uint16_t (&x)[4]) {
  const uint2 q = *reinterpret_cast<const uint2*>(p);
  x[0] = static_cast<uint16_t>(q.x);
  x[1] = static_cast<uint16_t>(q.x >> 16);
  x[2] = static_cast<uint16_t>(q.y);
  x[3] = static_cast<uint16_t>(q.y >> 16);
}
__device__ inline void store_vector(uint16_t* p, const uint16_t (&x)[1]) {
  *p = x[0];
}
__device__ inline void store_vector(uint16_t* p, const uint16_t (&x)[4]) {
  *reinterpret_cast<uint2*>(p) = make_uint2(static_cast<uint32_t>(x[0]) | static_cast<uint32_t>(x[1]) << 16,
                                            static_cast<uint32_t>(x[2]) | static_cast<uint32_t>(x[3]) << 16);
}

}  // namespace lab::ch06::cuda
