// The matmul lab as data: its versions, each validated against a CPU reference and timed by the kernel lab
// harness (common/lab/kernel_lab.h). The lab executable (ch06_matmul_lab) and the tests build it with the
// same function.
//
// The problem: C[M,N] = A[M,K] @ B[K,N], row-major (by default GPT-2 d12's c_fc at B*T = 4096 rows:
// K = 768 in, N = 3072 out), and for the epilogue versions gelu(C + bias[N]).
//
// Versions, GPU first (present when a CUDA device is visible; kernels in matmul.cu):
//   v1  naive                     v6  cuBLAS sgemm, strict fp32     v10 cuBLASLt fp32, bias+GELU epilogue
//   v2  shared-memory tiled       v7  cuBLAS sgemm, TF32            v11 cuBLASLt bf16
//   v3  register blocked          v8  cuBLASLt fp32, bias epilogue  v12 cuBLASLt bf16, bias epilogue
//   v4  vectorised (float4)       v9  v8, then a GELU kernel        v13 cuBLASLt bf16, bias+GELU epilogue
//   v5  tensor cores (WMMA, bf16)
// then the CPU (matmul_cpu.cpp): naive (left out above 1 GFLOP a run unless asked for), blocked, OpenBLAS
// sgemm, OpenBLAS sbgemm (bf16; when the build has it), OpenBLAS then bias and GELU passes (unfused), and the
// promoted fused path (matmul_bias_gelu.h).
//
// How each is judged:
//   fp32      against the CPU reference GEMM (common/ops/cpu/gemm.h; + bias + the CPU reference GELU), within
//             tolerance_for(f32, K) (tolerance_for_offset when A has an offset)
//   bf16      the low-precision rule: the error against an fp64 product of the same bf16 inputs within 4x the
//             error of a straightforward bf16-input, fp32-accumulate loop
//   TF32      the low-precision rule: the error against the fp64 product of the fp32 inputs within 4x that of
//             a loop on inputs rounded to TF32 (10 mantissa bits, to nearest even), accumulating in fp32
// Outputs are filled with NaN before each validation: an element a version does not write fails.
#pragma once

#include <cstdint>

#include "common/lab/kernel_lab.h"

namespace lab::ch06 {

struct MatmulProblem {
  int64_t M = 4096;  // rows: B*T
  int64_t N = 3072;  // columns: GPT-2's 4C
  int64_t K = 768;   // depth: GPT-2's C
  // A = offset + N(0, 1); B = N(0, 1/sqrt(K)), so that C is of order 1 (GELU's interesting range) when
  // offset = 0. A large offset makes every partial sum large against the result.
  float offset = 0.0f;
  uint64_t seed = 1;
  // The CPU's naive loop runs at any size when set; otherwise it is left out above kCpuNaiveFlopBudget FLOPs a
  // run (it keeps its version number, and the report says why and names --cpu-naive). At the default shape one
  // run is 19.3 GFLOP: 15 s to a minute on a 2-core VM, and the lab runs each version 24 times (a validation,
  // 3 warm-up runs, 20 repeats).
  bool cpu_naive_at_any_size = false;
};

inline constexpr double kCpuNaiveFlopBudget = 1e9;

// Whether make_matmul_lab's CPU naive loop runs at this problem's size (or is left out).
bool runs_cpu_naive(const MatmulProblem& problem);

kernel_lab::KernelLab make_matmul_lab(const MatmulProblem& problem);

}  // namespace lab::ch06
