// One cuBLASLt matmul with fp32 accumulation (CUBLAS_COMPUTE_32F), for the ops whose products read 16-bit
// operands on the tensor cores (cuda/linear.cu, cuda/batched_attention.cu): the descriptors and layouts, the
// preference, one algorithm from the heuristic, and the call, timed for the step profile. Column-major, as
// cublasSgemm: a row-major product D = A @ B is issued as D^T = B^T @ A^T.
//
// Alignment: cuBLASLt's heuristic assumes 256-byte-aligned matrices unless told otherwise, and a view into a
// tensor (a head of qkv, say) may start anywhere. Each call states the alignment its pointers and batch strides
// actually have, so the heuristic picks an algorithm that works with it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace lab::ops::cuda {

// One operand: `batch` column-major matrices of `type` (CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F), the first at
// `data` with leading dimension `ld`, each next one `stride` elements on.
struct LtMatrices {
  const void* data;
  cudaDataType_t type;
  int ld;
  int64_t stride = 0;
};

// The product and its names.
struct LtMatmul {
  cublasOperation_t op_a, op_b;
  int m, n, k;         // D is m x n, op(A) m x k and op(B) k x n
  int batch;           // products, one per matrix of each operand
  const char* op;      // the caller, named in the error when cuBLASLt has no algorithm
  const char* timing;  // the call's name in the step profile (a literal)
};

// D = alpha op(A) op(B) + beta D for each product of `mm`, in fp32; D is also C, so beta = 1 accumulates into it
// (and a 16-bit D rounds the sum once).
void cublaslt_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                     const LtMatrices& d, cudaStream_t stream);

}  // namespace lab::ops::cuda
