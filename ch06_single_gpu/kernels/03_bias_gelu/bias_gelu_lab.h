// The bias + GELU lab as data: its versions (bias_gelu_versions.h), each validated against the CPU reference
// and timed by the kernel lab harness (common/lab/kernel_lab.h). The lab executable and the tests build it
// with the same function.
//
// Three problems, one table each:
//   Forward         out = gelu(x + bias), x the first MLP Linear's output before its bias:
//                   v1 separate kernels, v2 one fused pass, then the CPU's separate passes and fused pass
//   Backward        dx = gelu'(x + bias) * dout, dbias += sum over rows of dx: the same four versions
//   LinearForward   the GEMM included, out = gelu(inp @ weight^T + bias): v1 and v2 after the core's cuBLAS
//                   GEMM, v3 the GEMM with cuBLASLt's bias + GELU epilogue (GPU versions only)
// The reference is the core's CPU GELU (common/ops/gelu.h) after a plain bias loop (for LinearForward, the core's
// Linear with its bias, then GELU); backward, the core's GELU backward, then a plain loop of column sums.
#pragma once

#include <cstdint>

#include "common/lab/kernel_lab.h"

namespace lab::ch06 {

struct BiasGeluProblem {
  int64_t rows = 8192;     // N = B*T (GPT-2 d12 at B = 8, T = 1024)
  int64_t columns = 3072;  // OC = 4C, the MLP's hidden width
  int64_t inputs = 768;    // C, the GEMM's depth (LinearForward only)
  // x = N(0, spread) (for LinearForward, the product's spread): wide enough to reach both tails of GELU.
  float spread = 2.0f;
  uint64_t seed = 1;
};

enum class BiasGeluPass { Forward, Backward, LinearForward };

kernel_lab::KernelLab make_bias_gelu_lab(const BiasGeluProblem& problem, BiasGeluPass pass);

}  // namespace lab::ch06
