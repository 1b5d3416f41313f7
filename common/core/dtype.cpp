#include "common/core/dtype.h"

#include "common/core/error.h"

namespace lab {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::U16: return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
    case DType::U16: return "u16";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U16})
    if (name == dtype_name(t)) return t;
  fail(ErrorKind::InvalidArgument, "unknown dtype '", name, "' (expected f32, bf16, f16, i32 or u16)");
}

uint16_t float_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value = mantissa * 2^-24. Shift the full mantissa into place and
    // round to nearest-even on the bits shifted out.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + (112 - exp) ... places bit 23 at the subnormal position
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) half += 1;
    return static_cast<uint16_t>(sign | half);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest-even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1;
  return static_cast<uint16_t>(sign | h);
}

float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mant;
      do {
        e++;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      out = sign | ((112 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace lab
