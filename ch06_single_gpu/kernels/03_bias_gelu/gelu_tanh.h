// The constants of GPT-2's GELU (tanh approximation), as common/ops/gelu.h defines it:
//   gelu(v) = 0.5 v (1 + tanh(u)) = v * sigmoid(2u),  u = sqrt(2/pi) (v + 0.044715 v^3)
//   gelu'(v) = s + 2 v s (1 - s) u',  s = sigmoid(2u),  u' = sqrt(2/pi) (1 + 3 * 0.044715 v^2)
// Both backends of this lab evaluate the sigmoid form, as the core does (1 + tanh(u) cancels for v below about
// -4): with expf on the GPU (bias_gelu.cu) and the vectorisable exp_fast on the CPU (bias_gelu_cpu.cpp), the
// exponentials of common/ops/cuda/gelu.cu and common/ops/cpu/gelu.cpp.
#pragma once

namespace lab::ch06::gelu_tanh {

inline constexpr float kSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kCubic = 0.044715f;

}  // namespace lab::ch06::gelu_tanh
