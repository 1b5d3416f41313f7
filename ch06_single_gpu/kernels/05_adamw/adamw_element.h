// One element of AdamW, and the bf16 conversions of the mixed-precision update: code shared by the CPU loops
// and the CUDA kernels of the AdamW lab (host and device functions under nvcc, plain C++ elsewhere), so that
// the two backends compute the same expression and round to bf16 with the same bits.
//
// The expression is common/ops/adamw.h's, in the order of its CPU reference (ops::cpu::adamw_update):
//   g = grad * grad_scale;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p - lr * ( (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * p ),   bc = 1 - beta^t
//
// bf16 values are handled as their 16 bits (uint16_t): bf16 is the top half of an IEEE float, so widening is
// a shift and rounding is integer arithmetic on the float's bits, identical on the host and the device.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/ops/adamw.h"

#ifdef __CUDACC__
#define CH06_HOST_DEVICE __host__ __device__
#else
#define CH06_HOST_DEVICE
#endif

namespace lab::ch06::adamw {

// What every element's update needs, computed once on the host (the bias corrections in double, as the core's
// kernels and CPU reference do). The weight decay is passed per element range.
struct Constants {
  float lr, beta1, beta2, eps, grad_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

inline Constants constants(const ops::AdamWHyper& h, float grad_scale) {
  const double t = static_cast<double>(h.step);
  return {h.lr,
          h.beta1,
          h.beta2,
          h.eps,
          grad_scale,
          static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta1), t)),
          static_cast<float>(1.0 - std::pow(static_cast<double>(h.beta2), t))};
}

// Updates m and v in place and returns the new parameter.
CH06_HOST_DEVICE inline float update(float p, float grad, float& m, float& v, const Constants& k, float weight_decay) {
  const float g = grad * k.grad_scale;
  m = k.beta1 * m + (1.0f - k.beta1) * g;
  v = k.beta2 * v + (1.0f - k.beta2) * g * g;
  const float m_hat = m / k.bias_correction1;
  const float v_hat = v / k.bias_correction2;
  return p - k.lr * (m_hat / (sqrtf(v_hat) + k.eps) + weight_decay * p);
}

// ---------------------------------------------------------------- bf16 as bits

CH06_HOST_DEVICE inline float bf16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// A gradient as a float, whichever of the two types holds it.
CH06_HOST_DEVICE inline float widen(float g) {
  return g;
}
CH06_HOST_DEVICE inline float widen(uint16_t bf16_bits) {
  return bf16_to_float(bf16_bits);
}

CH06_HOST_DEVICE inline uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

CH06_HOST_DEVICE inline bool is_nan_bits(uint32_t u) {
  return (u & 0x7fffffffu) > 0x7f800000u;
}

// To nearest, ties to even (adding 0x7fff plus the lowest kept bit carries exactly when the dropped half is
// above one half, or equal to it with an odd kept half); a NaN stays a quiet NaN.
CH06_HOST_DEVICE inline uint16_t bf16_round_nearest(float x) {
  const uint32_t u = float_bits(x);
  if (is_nan_bits(u)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Stochastically: the 16 dropped bits plus 16 uniform random bits carry into the kept half with probability
// (dropped bits) / 2^16, which is where x lies between its two bf16 neighbours; so the expected result is x
// itself. Magnitudes round up or down alike (a carry moves away from zero, for either sign); the largest
// finite values may round up to infinity, as rounding to nearest does near them. A NaN stays a quiet NaN.
CH06_HOST_DEVICE inline uint16_t bf16_round_stochastic(float x, uint32_t random) {
  const uint32_t u = float_bits(x);
  if (is_nan_bits(u)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + (random & 0xffffu)) >> 16);
}

// 32 random bits for element `index` under `seed`: SplitMix64's finaliser applied to seed + (index + 1) times
// the golden ratio. A counter-based generator: each element's bits depend on nothing else, so every launch
// configuration (and the CPU) draws the same ones.
CH06_HOST_DEVICE inline uint32_t random_bits(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

}  // namespace lab::ch06::adamw
