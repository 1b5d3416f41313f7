// The versions of the matmul lab, each a function on Tensors:  c[M,N] = a[M,K] @ b[K,N], row-major.
//
// GPU versions (matmul.cu; they run on the current stream of c's device):
//   v1 naive                one thread per output element, K loads of A and B from global memory each
//   v2 shared-memory tiled  32 x 32 tiles of A and B staged in shared memory, each global value read once per tile
//   v3 register blocked     128 x 128 block tiles, each thread an 8 x 8 micro-tile held in registers
//   v4 vectorised           v3 with 128-bit (float4) global loads and stores, A's tile transposed in shared memory
//   v5 tensor cores (WMMA)  bf16 inputs, fp32 accumulation: 16 x 16 x 16 mma_sync per warp instruction
//   cuBLAS sgemm            strict fp32, or TF32 tensor-core math (inputs rounded to 10 mantissa bits)
// cuBLASLt with the bias and bias + GELU epilogues is the promoted op's code path (matmul_bias_gelu.h).
//
// CPU versions (matmul_cpu.cpp):
//   naive triple loop, cache-blocked with a vectorisable inner loop, OpenBLAS cblas_sgemm, OpenBLAS
//   cblas_sbgemm (bf16 inputs, fp32 accumulation).
//
// fp32 versions take f32 tensors; bf16 versions take bf16 a and b and write f32 c. The GPU kernels index
// with 32-bit integers: M*K, K*N and M*N must stay below 2^31 (checked).
#pragma once

#include "common/core/tensor.h"

namespace lab::ch06::matmul {

// The sizes of c[M,N] = a[M,K] @ b[K,N], checked: 2-D tensors whose shapes agree, a and b of `input_dtype`,
// c f32. Error(InvalidArgument) naming `version` otherwise.
struct Dims {
  int64_t M = 0, N = 0, K = 0;
};
Dims check_dims(const Tensor& c, const Tensor& a, const Tensor& b, DType input_dtype, const char* version);

// ---------------------------------------------------------------- GPU
void gpu_naive(const Tensor& c, const Tensor& a, const Tensor& b);
void gpu_smem_tiled(const Tensor& c, const Tensor& a, const Tensor& b);
void gpu_register_blocked(const Tensor& c, const Tensor& a, const Tensor& b);
void gpu_vectorized(const Tensor& c, const Tensor& a, const Tensor& b);
void gpu_wmma_bf16(const Tensor& c, const Tensor& a, const Tensor& b);
void gpu_cublas_sgemm(const Tensor& c, const Tensor& a, const Tensor& b, bool tf32);

// ---------------------------------------------------------------- CPU
void cpu_naive(const Tensor& c, const Tensor& a, const Tensor& b);
void cpu_blocked(const Tensor& c, const Tensor& a, const Tensor& b);
void cpu_openblas(const Tensor& c, const Tensor& a, const Tensor& b);
// True when this build has OpenBLAS's cblas_sbgemm (cpu_sbgemm throws Unsupported otherwise).
bool cpu_has_sbgemm();
void cpu_sbgemm(const Tensor& c, const Tensor& a, const Tensor& b);

}  // namespace lab::ch06::matmul
