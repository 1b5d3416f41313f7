// The LayerNorm lab as data: its versions, each validated against the CPU reference and timed by the kernel
// lab harness (common/lab/kernel_lab.h). The lab executable and the tests build it with the same function.
//
// The problem is the residual add and the LayerNorm that reads its result, as GPT-2's blocks have them
// (h = x + attn(...); ln_2(h)), so that every version computes the same outputs from the same inputs and the
// fused version is compared with the unfused ones in one table:
//   forward:   residual = a + b;  out = layernorm(residual);  mean, rstd
//   backward:  from dout (the gradient of out) and dresidual (the gradient that reached residual from its other
//              reader): da, db, dweight, dbias, all accumulated onto their previous values
// Versions, GPU first (present when a CUDA device is visible):
//   v1-v3  the core's residual kernel, then LayerNorm v1 (thread per row), v2 (warp per row, the core's own) or
//          v3 (row in registers, float4); backward: LayerNorm vN's backward adding into the gradient of
//          residual, then the core's residual backward
//   v4     the fused residual + LayerNorm (ch06_single_gpu/fused_residual_layernorm.h)
//   CPU    the reference (ops::cpu: residual pass, then the LayerNorm's passes), then the fused one-pass loop
#pragma once

#include <cstdint>

#include "common/lab/kernel_lab.h"

namespace lab::ch06 {

struct LayerNormProblem {
  int64_t rows = 8192;     // N = B*T (GPT-2 d12 at B = 8, T = 1024)
  int64_t channels = 768;  // C
  // a = offset + N(0, spread), b = N(0, spread): rows far from zero (offset 1e4, spread 1) punish a variance
  // taken as E[x^2] - E[x]^2.
  float offset = 0.0f;
  float spread = 1.0f;
  uint64_t seed = 1;
};

enum class LabPass { Forward, Backward };

// Makes the inputs and the CPU reference's outputs, and adds the versions.
kernel_lab::KernelLab make_layernorm_lab(const LayerNormProblem& problem, LabPass pass);

}  // namespace lab::ch06
