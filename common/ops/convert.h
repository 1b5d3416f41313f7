// Element type conversion between fp32 and the 16-bit floating types, on the tensors' device.
//
//   convert(dst, src):  dst[i] = src[i] converted; fp32 -> bf16 or fp16, or bf16 or fp16 -> fp32
//
// Rounding to 16 bits is to nearest, ties to even (common/core/dtype.h on the CPU, the CUDA intrinsics
// __float2bfloat16_rn / __float2half_rn on the GPU: the same values); fp16 overflows to +-inf beyond 65504 and
// NaN stays NaN. Widening is exact. Mixed precision (chapter 6) uses it to round GEMM inputs and to refresh the
// low-precision copy of the weights after an optimizer step that does not write it itself (common/ops/adamw.h).
#pragma once

#include "common/core/tensor.h"

namespace lab::ops {

// dst and src on one device with equal element counts; one of them f32, the other bf16 or f16.
// InvalidArgument otherwise.
void convert(const Tensor& dst, const Tensor& src);

namespace cpu {
void convert(const Tensor& dst, const Tensor& src);
}  // namespace cpu
namespace cuda {
void convert(const Tensor& dst, const Tensor& src);
}  // namespace cuda

}  // namespace lab::ops
