// CUDA kernels of common/ops/linear.h: three cuBLAS sgemm calls, a bias broadcast and a bias reduction.
//
// cuBLAS is column-major and our tensors are row-major. A row-major [R, K] matrix is the same memory as a
// column-major [K, R] one, i.e. its transpose, so each row-major product D = A @ B is issued as the
// column-major product D^T = B^T @ A^T with the operands swapped:
//   forward  out[N,OC]    = inp[N,C] @ W[OC,C]^T   ->  sgemm(T, N, OC, N, C):  W (ld C),   inp (ld C)
//   dinp[N,C]            += dout[N,OC] @ W[OC,C]   ->  sgemm(N, N, C, N, OC):  W (ld C),   dout (ld OC)
//   dW[OC,C]             += dout^T @ inp           ->  sgemm(N, T, C, OC, N):  inp (ld C), dout (ld OC)
// The sgemm runs in the math mode of common/cuda/cublas.h: strict fp32, or TF32 when enabled.
//
// Bias, forward: a kernel writes the bias into every row of out (one thread per element, coalesced) and
// the GEMM accumulates onto it (beta = 1), as the CPU reference does.
// Bias, backward: dbias is a column sum of dout (column_sums.cuh: the rows split over enough blocks to fill
// the GPU, then a fixed summation order; deterministic, no atomics).
#include "common/cuda/cublas.h"
#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/linear.h"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

__global__ void broadcast_bias_kernel(float* out, const float* bias, int64_t N, int64_t OC) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * OC) return;
  out[i] = bias[i % OC];
}

// The summands of dbias[j] += sum_n dout[n, j].
struct BiasTerms {
  const float* dout;
  int64_t OC;
  __device__ void add(int64_t n, int64_t j, float (&part)[1]) const { part[0] += dout[n * OC + j]; }
};

}  // namespace

// ---------------------------------------------------------------- launchers

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(C > 0, InvalidArgument, "linear_forward: weight ", shape_str(weight.shape()), " has no input features");
  const int64_t N = inp.numel() / C;
  if (N == 0 || OC == 0) return;
  LaunchScope scope(out);
  float beta = 0.0f;
  if (bias.defined()) {
    LAB_LAUNCH(broadcast_bias_kernel, {grid_for(N * OC, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
               bias.data<float>(), N, OC);
    beta = 1.0f;
  }
  const float alpha = 1.0f;
  CUBLAS_CHECK(cublasSgemm(lab::cuda::cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, as_blas_int(OC, "out_features"),
                           as_blas_int(N, "rows"), as_blas_int(C, "in_features"), &alpha, weight.data<float>(),
                           static_cast<int>(C), inp.data<float>(), static_cast<int>(C), &beta, out.data<float>(),
                           static_cast<int>(OC)));
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight) {
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(C > 0, InvalidArgument, "linear_backward: weight ", shape_str(weight.shape()), " has no input features");
  const int64_t N = inp.numel() / C;
  if (N == 0 || OC == 0) return;
  const int n = as_blas_int(N, "rows"), c = as_blas_int(C, "in_features"), oc = as_blas_int(OC, "out_features");
  LaunchScope scope(dout);
  const float one = 1.0f;
  if (dinp.defined()) {
    CUBLAS_CHECK(cublasSgemm(lab::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, &one, weight.data<float>(),
                             c, dout.data<float>(), oc, &one, dinp.data<float>(), c));
  }
  if (dweight.defined()) {
    CUBLAS_CHECK(cublasSgemm(lab::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, &one, inp.data<float>(), c,
                             dout.data<float>(), oc, &one, dweight.data<float>(), c));
  }
  if (dbias.defined()) {
    add_column_sums<1>({{dbias.data<float>()}}, BiasTerms{dout.data<float>(), OC}, N, OC, dout.device(),
                       scope.stream());
  }
}

}  // namespace lab::ops::cuda
