// One cuBLASLt matmul with fp32 accumulation, for the ops whose products run through cuBLASLt (cuda/linear.cu,
// cuda/batched_attention.cu, and chapter 6's GEMM with a GELU epilogue): the descriptors and layouts, an optional
// bias and GELU epilogue, the preference, one algorithm
// from the heuristic, and the call, timed for the step profile. Column-major, as cublasSgemm: a row-major product
// D = A @ B is issued as D^T = B^T @ A^T.
//
// Alignment: cuBLASLt's heuristic assumes 256-byte-aligned matrices unless told otherwise, and a view into a
// tensor (a head of qkv, say) may start anywhere. Each call states the alignment its pointers and batch strides
// actually have, so the heuristic picks an algorithm that works with it. The bias has no such preference: the
// heuristic reads the bias pointer itself to learn its alignment (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER),
// so the pointer is set before the heuristic runs, and the algorithm is chosen for the very bias it will read.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/core/dtype.h"

namespace lab::ops::cuda {

// One operand: `batch` column-major matrices of `type` (CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F), the first at
// `data` with leading dimension `ld`, each next one `stride` elements on.
struct LtMatrices {
  const void* data;
  cudaDataType_t type;
  int ld;
  int64_t stride = 0;
};

// The bias of CUBLASLT_EPILOGUE_BIAS: one value per row of D (m of them, the same for every product of a batch),
// added to the fp32 sum before D is stored. Its type must be D's: cuBLASLt's header
// (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) allows another only for integer and fp8 products, so an fp32 bias goes with an
// fp32 D.
struct LtBias {
  const void* data = nullptr;  // none: the DEFAULT epilogue
  cudaDataType_t type = CUDA_R_32F;
};

// A GELU in the epilogue (cuBLASLt's GELU epilogues), through an aux matrix of D's type with D's layout (one
// product: batch 1), leading dimension `ld`:
//   Gelu      D = gelu(sum + bias); aux, when given, receives sum + bias, GELU's input, for the backward (GELU_AUX)
//   GeluGrad  D = sum * gelu'(aux), aux read: the backward of a GELU whose input aux kept (DGELU; no bias)
// where sum = alpha op(A) op(B) + beta C. GELU is the tanh approximation (cuBLASLt's may differ from another in the
// last bits). The heuristic reads the aux pointer for its alignment, as it reads the bias's.
enum class LtActivation { None, Gelu, GeluGrad };
struct LtAux {
  LtActivation activation = LtActivation::None;
  const void* data = nullptr;
  int64_t ld = 0;
};

// The product and its names.
struct LtMatmul {
  cublasOperation_t op_a, op_b;
  int m, n, k;         // D is m x n, op(A) m x k and op(B) k x n
  int batch;           // products, one per matrix of each operand
  const char* op;      // the caller, named in the error when cuBLASLt has no algorithm
  const char* timing;  // the call's name in the step profile (a literal)
  // fp32 accumulation: CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 for fp32 operands rounded to TF32
  // (lab::cuda::fp32_compute_type()); 16-bit operands are read exactly either way.
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  LtBias bias = {};
  LtAux epilogue = {};
  // BGRADB, with no bias and no activation: bias_gradient[j] = the sum over k of op(B)[:, j], one fp32 per column of
  // an fp32 D (n of them; cuBLASLt gives the bias gradient D's type), written, not added. The weight gradient of a
  // linear layer, dW^T = inp^T-ish @ dout, thus also gives the bias gradient from the dout tiles it loads anyway.
  // The heuristic reads the pointer's alignment, as the bias's.
  void* bias_gradient = nullptr;
};

// cuBLASLt's type of a tensor's dtype: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F.
cudaDataType_t lt_data_type(DType dtype);

// The step profile's name of a cuBLASLt matmul with `dtype` operands, one literal per operand type; fp32 operands
// are named by the current math mode (strict f32, or TF32: lab::cuda::tf32_enabled()).
struct LtTimingNames {
  const char* f32;
  const char* tf32;
  const char* bf16;
  const char* f16;
};
inline constexpr LtTimingNames kLtMatmulNames = {"cublasLt matmul f32", "cublasLt matmul tf32", "cublasLt matmul bf16",
                                                 "cublasLt matmul f16"};
const char* lt_timing(DType dtype, const LtTimingNames& names = kLtMatmulNames);

// D = alpha op(A) op(B) + beta D (+ bias) for each product of `mm`, in fp32; D is also C, so beta = 1 accumulates
// into it (and a 16-bit D rounds the sum once). Error(Unsupported), naming the product, when cuBLASLt has no
// algorithm for it.
void cublaslt_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                     const LtMatrices& d, cudaStream_t stream);
// The same, or false, having queued nothing, when cuBLASLt has no algorithm for it (for an epilogue that is an
// option: the caller then does its work another way).
bool try_cublaslt_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                         const LtMatrices& d, cudaStream_t stream);

}  // namespace lab::ops::cuda
