// Stand-in for the CUDA toolkit's cuda_bf16.h (LAB_CUDA_EMULATION): bfloat16 (the top half of an IEEE
// float) as __nv_bfloat16 (and the pair __nv_bfloat162), with the conversions and arithmetic kernels use.
// Conversions from float round to nearest-even and keep NaN a NaN, as __float2bfloat16 does; arithmetic is
// done in float and rounded once.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "vector_types.h"

namespace lab::cuda::emu {

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays (quiet) NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace lab::cuda::emu

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(lab::cuda::emu::float_to_bf16_bits(f)) {}
  operator float() const { return lab::cuda::emu::bf16_bits_to_float(__x); }
};

struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline __nv_bfloat16 __float2bfloat16(float f) {
  return __nv_bfloat16(f);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16(f);
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return static_cast<float>(b);
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 b) {
  return float2{static_cast<float>(b.x), static_cast<float>(b.y)};
}
inline float __low2float(__nv_bfloat162 b) {
  return static_cast<float>(b.x);
}
inline float __high2float(__nv_bfloat162 b) {
  return static_cast<float>(b.y);
}

inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(static_cast<float>(a) + static_cast<float>(b));
}
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(static_cast<float>(a) - static_cast<float>(b));
}
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(static_cast<float>(a) * static_cast<float>(b));
}
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(static_cast<float>(a) / static_cast<float>(b));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
  __nv_bfloat16 r = a;
  r.__x ^= 0x8000u;
  return r;
}

inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hadd(a, b);
}
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hsub(a, b);
}
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hmul(a, b);
}
inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __hdiv(a, b);
}
inline __nv_bfloat16 operator-(__nv_bfloat16 a) {
  return __hneg(a);
}
