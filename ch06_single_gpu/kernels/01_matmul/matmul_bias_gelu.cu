// CUDA path of ch06_single_gpu/matmul_bias_gelu.h: one cuBLASLt matmul with the epilogue fused, through the core's
// cuBLASLt call (common/ops/cuda/cublaslt_matmul.cuh: it states the operands' real alignments to the heuristic,
// keeps split-K sums in fp32, and times the call for the step profile).
//
// cuBLASLt is column-major and our tensors are row-major. A row-major [R, C] matrix is the same memory as a
// column-major [C, R] one, so the row-major out[M,N] = a[M,K] @ op(b) is issued as the column-major
// out^T[N,M] = op(b)^T a^T:
//   first operand   b: row-major [K,N] is column-major N x K (ld N, no transpose); row-major [N,K] (a Linear's
//                   weight) is column-major K x N (ld K), transposed
//   second operand  a: row-major [M,K] is column-major K x M (ld K), no transpose
//   result          column-major N x M (ld N); the bias has one entry per row of it (N), as cuBLASLt wants; the
//                   aux matrix (pre_gelu) has the result's layout (ld N)
// cuBLASLt picks its kernel by a heuristic for these shapes, types and epilogue. When it has no kernel for a
// combination (alignment of odd shapes with an aux matrix, on some GPUs), the call fails with an Unsupported error
// naming the shapes.
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/cuda/cublas.h"
#include "common/ops/cuda/cublaslt_matmul.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::cuda {

namespace {

using ops::cuda::LtActivation;

LtActivation lt_activation(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::None:
    case Epilogue::Bias: return LtActivation::None;
    case Epilogue::Gelu:
    case Epilogue::BiasGelu: return LtActivation::Gelu;
    case Epilogue::GeluGrad: return LtActivation::GeluGrad;
  }
  return LtActivation::None;
}

// The call's name in the step profile (a literal): the epilogue with a GELU, and the inputs' type.
const char* timing_name(Epilogue epilogue, DType inputs) {
  static constexpr ops::cuda::LtTimingNames kGelu = {"cublasLt matmul+gelu f32", "cublasLt matmul+gelu tf32",
                                                     "cublasLt matmul+gelu bf16", "cublasLt matmul+gelu f16"};
  static constexpr ops::cuda::LtTimingNames kGeluGrad = {"cublasLt matmul+dgelu f32", "cublasLt matmul+dgelu tf32",
                                                         "cublasLt matmul+dgelu bf16", "cublasLt matmul+dgelu f16"};
  switch (lt_activation(epilogue)) {
    case LtActivation::None: return ops::cuda::lt_timing(inputs);
    case LtActivation::Gelu: return ops::cuda::lt_timing(inputs, kGelu);
    case LtActivation::GeluGrad: return ops::cuda::lt_timing(inputs, kGeluGrad);
  }
  return ops::cuda::lt_timing(inputs);
}

}  // namespace

void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue) {
  const int64_t M = a.dim(0), K = a.dim(1), N = out.dim(1);
  ops::cuda::LaunchScope scope(out);
  const int m = ops::cuda::as_blas_int(N, "matmul_epilogue columns"),
            n = ops::cuda::as_blas_int(M, "matmul_epilogue rows"),
            k = ops::cuda::as_blas_int(K, "matmul_epilogue inner dimension");
  ops::cuda::LtMatmul mm{b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, 1, "matmul_epilogue",
                         timing_name(epilogue, a.dtype())};
  // fp32 inputs follow the process-wide TF32 switch; 16-bit inputs always accumulate in strict fp32.
  mm.compute = a.dtype() == DType::F32 ? lab::cuda::fp32_compute_type() : CUBLAS_COMPUTE_32F;
  if (bias.defined()) mm.bias = {bias.raw(), ops::cuda::lt_data_type(bias.dtype())};
  mm.epilogue = {lt_activation(epilogue), pre_gelu.defined() ? pre_gelu.raw() : nullptr, N};
  const cudaDataType_t in = ops::cuda::lt_data_type(a.dtype());
  ops::cuda::cublaslt_matmul(mm, 1.0f, {b.raw(), in, b_transposed ? k : m}, {a.raw(), in, k}, 0.0f,
                             {out.raw(), ops::cuda::lt_data_type(out.dtype()), m}, scope.stream());
}

}  // namespace lab::ch06::cuda
