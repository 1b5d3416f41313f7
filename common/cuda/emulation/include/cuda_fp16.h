// Stand-in for the CUDA toolkit's cuda_fp16.h (LAB_CUDA_EMULATION): the IEEE half type __half (and the pair
// __half2) with the conversions and arithmetic kernels use. Conversions from float round to nearest-even
// (overflow to infinity, NaN stays NaN), as __float2half does; arithmetic is done in float and rounded once,
// which is what the GPU's half instructions give for +, -, * and fma.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "vector_types.h"

namespace lab::cuda::emu {

inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7fff;                            // NaN: the canonical half NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;                   // rounds to 65536 or more: infinity
  if (magnitude < 0x38800000u) {                                         // below 2^-14: a half subnormal (or zero)
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // in units of 2^-24, exact
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // A normal half: round the float mantissa to 10 bits (to nearest, ties to even), then rebias the exponent.
  const uint32_t rounded = magnitude + 0x0fffu + ((magnitude >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float value = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -value : value;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace lab::cuda::emu

struct __half {
  uint16_t __x;
  __half() = default;
  __half(float f) : __x(lab::cuda::emu::float_to_half_bits(f)) {}
  operator float() const { return lab::cuda::emu::half_bits_to_float(__x); }
};

struct __half2 {
  __half x, y;
};

inline __half __float2half(float f) {
  return __half(f);
}
inline __half __float2half_rn(float f) {
  return __half(f);
}
inline float __half2float(__half h) {
  return static_cast<float>(h);
}
inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__half(a), __half(b)};
}
inline float2 __half22float2(__half2 h) {
  return float2{static_cast<float>(h.x), static_cast<float>(h.y)};
}
inline float __low2float(__half2 h) {
  return static_cast<float>(h.x);
}
inline float __high2float(__half2 h) {
  return static_cast<float>(h.y);
}

inline __half __hadd(__half a, __half b) {
  return __half(static_cast<float>(a) + static_cast<float>(b));
}
inline __half __hsub(__half a, __half b) {
  return __half(static_cast<float>(a) - static_cast<float>(b));
}
inline __half __hmul(__half a, __half b) {
  return __half(static_cast<float>(a) * static_cast<float>(b));
}
inline __half __hdiv(__half a, __half b) {
  return __half(static_cast<float>(a) / static_cast<float>(b));
}
inline __half __hfma(__half a, __half b, __half c) {
  return __half(std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)));
}
inline __half __hneg(__half a) {
  __half r = a;
  r.__x ^= 0x8000u;
  return r;
}

inline __half operator+(__half a, __half b) {
  return __hadd(a, b);
}
inline __half operator-(__half a, __half b) {
  return __hsub(a, b);
}
inline __half operator*(__half a, __half b) {
  return __hmul(a, b);
}
inline __half operator/(__half a, __half b) {
  return __hdiv(a, b);
}
inline __half operator-(__half a) {
  return __hneg(a);
}
