// CUDA kernels of common/ops/linear.h: three cuBLAS sgemm calls, a bias broadcast and a bias reduction.
//
// cuBLAS is column-major and our tensors are row-major. A row-major [R, K] matrix is the same memory as a
// column-major [K, R] one, i.e. its transpose, so each row-major product D = A @ B is issued as the
// column-major product D^T = B^T @ A^T with the operands swapped:
//   forward  out[N,OC]    = inp[N,C] @ W[OC,C]^T   ->  sgemm(T, N, OC, N, C):  W (ld C),   inp (ld C)
//   dinp[N,C]            += dout[N,OC] @ W[OC,C]   ->  sgemm(N, N, C, N, OC):  W (ld C),   dout (ld OC)
//   dW[OC,C]             += dout^T @ inp           ->  sgemm(N, T, C, OC, N):  inp (ld C), dout (ld OC)
//   rows [r, r+R) of dW alone: the same on R columns of dout  (sgemm(N, T, C, R, N), dout + r (ld OC))
// The sgemm runs in the math mode of common/cuda/cublas.h: strict fp32, or TF32 when enabled.
//
// 16-bit inputs (bf16 or fp16, linear.h): the same three products as cuBLASLt matmuls (cuda/cublaslt_matmul.cuh)
// with 16-bit A and B, fp32 C and D and fp32 compute (the tensor cores' 16-bit path; TF32 does not apply).
// Backward first rounds an fp32 dout to the 16-bit type into a workspace tensor (common/ops/convert.h), since both
// operands of such a product are 16-bit; the bias gradient reads the fp32 dout. With 16-bit activations end to end
// dout is 16-bit already and is read as it is, and a 16-bit dinp is cuBLASLt's 16-bit D: the fp32 sum onto the
// widened dinp, rounded once. A 16-bit out is the fp32 result in a
// workspace tensor, rounded into out by convert(): one more pass over the output, where cuBLASLt could write a
// 16-bit D itself, but the same rounding as the CPU's and one code path for the bias.
//
// Bias, forward: a kernel writes the bias into every row of out (one thread per element, coalesced) and
// the GEMM accumulates onto it (beta = 1), as the CPU reference does.
// Bias, backward: dbias is a column sum of dout (column_sums.cuh: the rows split over enough blocks to fill
// the GPU, then a fixed summation order; deterministic, no atomics).
#include "common/core/memory.h"
#include "common/cuda/cublas.h"
#include "common/cuda/kernel_timing.h"
#include "common/ops/convert.h"
#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/cublaslt_matmul.cuh"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/linear.h"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

__global__ void broadcast_bias_kernel(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * OC) return;
  out[i] = bias[i % OC];
}

// The summands of dbias[j] += sum_n dout[n, j], dout stored as D (float, or a 16-bit type widened exactly).
template <typename D>
struct BiasTerms {
  const D* dout;
  int64_t OC;
  __device__ void add(int64_t n, int64_t j, float (&part)[1]) const { part[0] += load(dout[n * OC + j]); }
};

cudaDataType_t lt_type(DType dtype) {
  return dtype == DType::BF16 ? CUDA_R_16BF : dtype == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

// ---------------------------------------------------------------- 16-bit products

// C[m,n] = op(A) op(B) + beta C, column-major as cublasSgemm takes it, with A and B of the 16-bit `dtype`, C of
// `c_dtype` (fp32, or `dtype`: the fp32 sum rounded once) and fp32 compute.
void gemm_16bit(DType dtype, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* A,
                int lda, const void* B, int ldb, float beta, void* C, DType c_dtype, int ldc, cudaStream_t stream) {
  const cudaDataType_t type = lt_type(dtype);
  const char* timing = dtype == DType::BF16 ? "cublasLt matmul bf16" : "cublasLt matmul f16";
  cublaslt_matmul({transa, transb, m, n, k, 1, "linear", timing}, 1.0f, {A, type, lda}, {B, type, ldb}, beta,
                  {C, lt_type(c_dtype), ldc}, stream);
}

// C = op(A) op(B) + beta C as above, C of `c_dtype`: by cublasSgemm for f32 operands (in the TF32 mode of cublas.h;
// their C is f32, as linear.cpp's checks hold) and by gemm_16bit for bf16 and fp16 ones.
void gemm(DType dtype, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* A, int lda,
          const void* B, int ldb, float beta, void* C, DType c_dtype, int ldc, cudaStream_t stream) {
  if (dtype != DType::F32) {
    gemm_16bit(dtype, transa, transb, m, n, k, A, lda, B, ldb, beta, C, c_dtype, ldc, stream);
    return;
  }
  const float alpha = 1.0f;
  const lab::cuda::KernelTiming timing(lab::cuda::tf32_enabled() ? "cublasSgemm tf32" : "cublasSgemm", stream);
  CUBLAS_CHECK(cublasSgemm(lab::cuda::cublas_handle(), transa, transb, m, n, k, &alpha, static_cast<const float*>(A),
                           lda, static_cast<const float*>(B), ldb, &beta, static_cast<float*>(C), ldc));
}

}  // namespace

// ---------------------------------------------------------------- launchers

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(C > 0, InvalidArgument, "linear_forward: weight ", shape_str(weight.shape()), " has no input features");
  const int64_t N = inp.numel() / C;
  if (N == 0 || OC == 0) return;
  if (out.dtype() != DType::F32) {
    MemoryScope workspace(MemCategory::Workspace);
    const Tensor sum = Tensor::empty(out.shape(), DType::F32, out.device());
    linear_forward(sum, inp, weight, bias);
    convert(out, sum);
    return;
  }
  LaunchScope scope(out);
  float beta = 0.0f;
  if (bias.defined()) {
    LAB_LAUNCH(broadcast_bias_kernel, {grid_for(N * OC, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
               bias.data<float>(), N, OC);
    beta = 1.0f;
  }
  gemm(inp.dtype(), CUBLAS_OP_T, CUBLAS_OP_N, as_blas_int(OC, "out_features"), as_blas_int(N, "rows"),
       as_blas_int(C, "in_features"), weight.raw(), static_cast<int>(C), inp.raw(), static_cast<int>(C), beta,
       out.raw(), DType::F32, static_cast<int>(OC), scope.stream());
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight) {
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(C > 0, InvalidArgument, "linear_backward: weight ", shape_str(weight.shape()), " has no input features");
  const int64_t N = inp.numel() / C;
  if (N == 0 || OC == 0) return;
  const int n = as_blas_int(N, "rows"), c = as_blas_int(C, "in_features"), oc = as_blas_int(OC, "out_features");
  LaunchScope scope(dout);
  // The products' dout: an fp32 dout rounded to the inputs' 16-bit type (linear.h), or dout itself.
  Tensor product_dout = dout;
  if (inp.dtype() != dout.dtype()) {
    MemoryScope workspace(MemCategory::Workspace);
    product_dout = Tensor::empty(dout.shape(), inp.dtype(), dout.device());
    convert(product_dout, dout);
  }
  if (dinp.defined()) {  // with 16-bit activations dinp is 16-bit: cuBLASLt's 16-bit D
    gemm(inp.dtype(), CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, weight.raw(), c, product_dout.raw(), oc, 1.0f, dinp.raw(),
         dinp.dtype(), c, scope.stream());
  }
  if (dweight.defined()) {
    gemm(inp.dtype(), CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, inp.raw(), c, product_dout.raw(), oc, 1.0f, dweight.raw(),
         DType::F32, c, scope.stream());
  }
  if (dbias.defined()) {
    dispatch_float_dtype(dout.dtype(), "linear_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using D = typename DeviceType<T>::type;
      add_column_sums<1>({{dbias.data<float>()}}, BiasTerms<D>{device_data<T>(dout), OC}, N, OC, dout.device(),
                         scope.stream());
    });
  }
}

void linear_weight_grad_rows(const Tensor& dweight_rows, const Tensor& dout, const Tensor& inp, int64_t row_begin) {
  const int64_t R = dweight_rows.dim(0), C = dweight_rows.dim(1), N = inp.numel() / C, OC = dout.dim(-1);
  if (N == 0 || R == 0) return;
  const int c = as_blas_int(C, "in_features");
  LaunchScope scope(dout);
  // The dweight product of linear_backward on R columns of dout, which start row_begin floats into each row.
  gemm(DType::F32, CUBLAS_OP_N, CUBLAS_OP_T, c, as_blas_int(R, "weight rows"), as_blas_int(N, "rows"), inp.raw(), c,
       dout.data<float>() + row_begin, as_blas_int(OC, "out_features"), 1.0f, dweight_rows.raw(), DType::F32, c,
       scope.stream());
}

}  // namespace lab::ops::cuda
