// Stand-in for CUDA's device math (LAB_CUDA_EMULATION). The standard functions (expf, logf, sqrtf, tanhf,
// fmaxf, fmaf, ...) are the host C library's; this header adds the CUDA-only ones. The fast intrinsics
// (__expf, __fdividef, ...) compute the accurate value here: the emulator checks what a kernel computes,
// not the last bits a GPU's approximations would give.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}

// ---------------------------------------------------------------- fast intrinsics (accurate here)
inline float __expf(float x) {
  return expf(x);
}
inline float __exp10f(float x) {
  return powf(10.0f, x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __log2f(float x) {
  return log2f(x);
}
inline float __log10f(float x) {
  return log10f(x);
}
inline float __sinf(float x) {
  return sinf(x);
}
inline float __cosf(float x) {
  return cosf(x);
}
inline float __tanf(float x) {
  return tanf(x);
}
inline float __powf(float x, float y) {
  return powf(x, y);
}
inline void __sincosf(float x, float* s, float* c) {
  *s = sinf(x);
  *c = cosf(x);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float fdividef(float x, float y) {
  return x / y;
}
// Clamps to [0, 1]; NaN gives 0.
inline float __saturatef(float x) {
  return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f);
}

// ---------------------------------------------------------------- IEEE round-to-nearest operations
inline float __fadd_rn(float x, float y) {
  return x + y;
}
inline float __fsub_rn(float x, float y) {
  return x - y;
}
inline float __fmul_rn(float x, float y) {
  return x * y;
}
inline float __fdiv_rn(float x, float y) {
  return x / y;
}
inline float __fmaf_rn(float x, float y, float z) {
  return fmaf(x, y, z);
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return sqrtf(x);
}
inline float __frsqrt_rn(float x) {
  return 1.0f / sqrtf(x);
}

// ---------------------------------------------------------------- conversions and bit casts
inline int __float2int_rn(float x) {
  return static_cast<int>(nearbyintf(x));  // the default rounding mode: to nearest, ties to even
}
inline int __float2int_rz(float x) {
  return static_cast<int>(truncf(x));
}
inline int __float2int_rd(float x) {
  return static_cast<int>(floorf(x));
}
inline int __float2int_ru(float x) {
  return static_cast<int>(ceilf(x));
}
inline unsigned int __float2uint_rn(float x) {
  return static_cast<unsigned int>(nearbyintf(x));
}
inline float __int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline int __float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline float __uint_as_float(unsigned int x) {
  return std::bit_cast<float>(x);
}
inline unsigned int __float_as_uint(float x) {
  return std::bit_cast<unsigned int>(x);
}
inline double __longlong_as_double(long long x) {
  return std::bit_cast<double>(x);
}
inline long long __double_as_longlong(double x) {
  return std::bit_cast<long long>(x);
}

// ---------------------------------------------------------------- integer bit operations
inline int __popc(unsigned int x) {
  return std::popcount(x);
}
inline int __popcll(unsigned long long x) {
  return std::popcount(x);
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned int>(x));
}
inline int __clzll(long long x) {
  return std::countl_zero(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) {  // 1-based position of the least significant set bit; 0 for 0
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned int>(x)) + 1;
}
inline int __ffsll(long long x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned long long>(x)) + 1;
}
inline unsigned int __brev(unsigned int x) {
  unsigned int r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

// ---------------------------------------------------------------- min / max (CUDA declares them globally)
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned int min(unsigned int a, unsigned int b) {
  return a < b ? a : b;
}
inline unsigned int max(unsigned int a, unsigned int b) {
  return a > b ? a : b;
}
inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
inline unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
inline float min(float a, float b) {
  return fminf(a, b);
}
inline float max(float a, float b) {
  return fmaxf(a, b);
}
inline double min(double a, double b) {
  return fmin(a, b);
}
inline double max(double a, double b) {
  return fmax(a, b);
}
