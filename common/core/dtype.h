// Element types. Low-precision types are stored narrow and converted to float for arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace lab {

enum class DType : uint8_t { F32, BF16, F16, I32, U16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);             // "f32", "bf16", "f16", "i32", "u16"
DType parse_dtype(const std::string& name);  // throws InvalidArgument on an unknown name

// C++ type <-> DType, for Tensor::data<T>() checks.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct DTypeOf<uint16_t> {
  static constexpr DType value = DType::U16;
};

// ---------------------------------------------------------------- bf16 / f16 on the host
// bf16 is the top half of an IEEE float; rounding is to nearest-even, NaN stays NaN.
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t float_to_f16_bits(float f);  // round to nearest-even, overflow to inf
float f16_bits_to_float(uint16_t h);

// ---------------------------------------------------------------- 16-bit storage types on the host
// The element types of bf16 and f16 tensors for CPU kernels templated on their storage type (Tensor::data<Bf16>()),
// with the conversions such a kernel needs: load as float, compute in float, store rounded (nearest-even).
struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};
template <>
struct DTypeOf<Bf16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct DTypeOf<F16> {
  static constexpr DType value = DType::F16;
};

inline float to_float(float v) {
  return v;
}
inline float to_float(Bf16 v) {
  return bf16_bits_to_float(v.bits);
}
inline float to_float(F16 v) {
  return f16_bits_to_float(v.bits);
}
template <typename T>
T from_float(float v);
template <>
inline float from_float<float>(float v) {
  return v;
}
template <>
inline Bf16 from_float<Bf16>(float v) {
  return Bf16{float_to_bf16_bits(v)};
}
template <>
inline F16 from_float<F16>(float v) {
  return F16{float_to_f16_bits(v)};
}

}  // namespace lab
