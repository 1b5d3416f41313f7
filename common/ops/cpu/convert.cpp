// CPU conversion of common/ops/convert.h: one parallel loop with dtype.h's scalar conversions.
#include "common/ops/convert.h"

#include <cstdint>

namespace lab::ops::cpu {

namespace {

template <typename Widen>
void widen(float* dst, const uint16_t* src, int64_t n, Widen to_float) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}

template <typename Round>
void narrow(uint16_t* dst, const float* src, int64_t n, Round to_bits) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bits(src[i]);
}

}  // namespace

void convert(const Tensor& dst, const Tensor& src) {
  const int64_t n = src.numel();
  if (dst.dtype() == DType::F32) {
    const auto* s = static_cast<const uint16_t*>(src.raw());
    if (src.dtype() == DType::BF16)
      widen(dst.data<float>(), s, n, bf16_bits_to_float);
    else
      widen(dst.data<float>(), s, n, f16_bits_to_float);
    return;
  }
  auto* d = static_cast<uint16_t*>(dst.raw());
  if (dst.dtype() == DType::BF16)
    narrow(d, src.data<float>(), n, float_to_bf16_bits);
  else
    narrow(d, src.data<float>(), n, float_to_f16_bits);
}

}  // namespace lab::ops::cpu
