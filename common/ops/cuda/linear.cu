// CUDA kernels of common/ops/linear.h: a cuBLASLt matmul with the bias in its epilogue forward, two products and a
// bias reduction backward (with 16-bit activations, the bias reduction in the weight gradient's epilogue).
//
// cuBLAS is column-major and our tensors are row-major. A row-major [R, K] matrix is the same memory as a
// column-major [K, R] one, i.e. its transpose, so each row-major product D = A @ B is issued as the
// column-major product D^T = B^T @ A^T with the operands swapped:
//   forward  out[N,OC]    = inp[N,C] @ W[OC,C]^T   ->  matmul(T, N, OC, N, C): W (ld C),   inp (ld C), + bias
//   dinp[N,C]            += dout[N,OC] @ W[OC,C]   ->  sgemm(N, N, C, N, OC):  W (ld C),   dout (ld OC)
//   dW[OC,C]             += dout^T @ inp           ->  sgemm(N, T, C, OC, N):  inp (ld C), dout (ld OC)
//   rows [r, r+R) of dW alone: the same on R columns of dout  (sgemm(N, T, C, R, N), dout + r (ld OC))
// fp32 products run in the math mode of common/cuda/cublas.h: strict fp32, or TF32 when enabled (for the forward's
// cuBLASLt matmul, the compute type CUBLAS_COMPUTE_32F or CUBLAS_COMPUTE_32F_FAST_TF32).
//
// Forward: one cuBLASLt matmul (cuda/cublaslt_matmul.cuh), beta = 0, the bias added by its BIAS epilogue to each
// tile of the product while it is in registers, D written in out's dtype. The bias is one value per row of the
// column-major D (OC of them), as the epilogue wants. Fusing it saves a kernel per linear layer and a pass over the
// output: a separate bias kernel would write all of out first and the GEMM read it back (beta = 1).
// Numerics: the product's fp32 sum plus the bias, rounded once to out's dtype. The CPU reference starts its sum
// from the bias instead (beta = 1 onto a broadcast copy), so the two add the same numbers in another order and
// agree within the f32 tolerance of the sum's length, not bit for bit; the tests compare within it.
//
// 16-bit inputs (bf16 or fp16, linear.h): the products read 16-bit A and B on the tensor cores and accumulate in
// fp32 (TF32 does not apply). An fp32 out is cuBLASLt's fp32 D, and a 16-bit out without a bias its 16-bit D: the
// fp32 sum rounded once. cuBLASLt's bias has D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: another
// type only for integer and fp8 products), so a 16-bit out is one matmul with a bias of its own 16-bit type (the
// model passes its 16-bit copy of the bias, linear.h), and an fp32 bias only goes with an fp32 D: a 16-bit out with
// an fp32 bias computes an fp32 D, bias included, into a workspace tensor and rounds it into out with convert(),
// one more pass over the output.
// Backward first rounds an fp32 dout to the 16-bit type into a workspace tensor (common/ops/convert.h), since both
// operands of such a product are 16-bit; the bias gradient reads the fp32 dout. With 16-bit activations end to end
// dout is 16-bit already and is read as it is, and a 16-bit dinp is cuBLASLt's 16-bit D: the fp32 sum onto the
// widened dinp, rounded once.
//
// Alignment: a bias is any fp32 tensor, often a view into the flat parameter buffer (common/nn/parameters.h starts
// each parameter at a multiple of 128 bytes; a tensor-parallel shard of a bias may start anywhere on 4 bytes).
// cuBLASLt's heuristic reads the bias pointer and picks an algorithm for its actual alignment
// (cublaslt_matmul.cuh), so every fp32 bias works; if none existed, the call fails naming the alignment.
//
// Bias, backward: dbias is a column sum of dout. With 16-bit activations (dout already in the products' 16-bit
// type), the weight gradient's product gives it too: cuBLASLt's BGRADB epilogue sums the columns of op(B) = dout over
// k while the GEMM streams dout's tiles through anyway, so no kernel reads dout a second time (for GPT-2's four
// linear layers, 9 C of every row of dout per block). The epilogue writes its sums (fp32, D's type); they go into a
// workspace of OC floats, and a kernel of OC threads adds them into dbias, which accumulates over micro-batches. Its
// summation order is cuBLASLt's. Elsewhere, or where cuBLASLt has no algorithm with the epilogue, dbias comes from
// column_sums.cuh (the rows split over enough blocks to fill the GPU, then a fixed summation order; deterministic,
// no atomics), read in 16-byte pieces where dout's rows split into them (OC a multiple of 4 f32 or 8 16-bit values,
// as in GPT-2); with an fp32 dout and 16-bit products, that sum reads the fp32 dout, not its rounded copy.
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

// The summands of dbias[j] += sum_n dout[n, j], dout stored as D (float, or a 16-bit type widened exactly).
template <typename D>
struct BiasTerms {
  const D* dout;
  int64_t OC;
  __device__ void add(int64_t n, int64_t j, float (&part)[1]) const { part[0] += load(dout[n * OC + j]); }
};

// dbias[j] += sums[j]: the bias gradient the weight gradient's product wrote (BGRADB), added.
__global__ void add_bias_gradient_kernel(float* dbias, const float* sums, int64_t OC) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j < OC) dbias[j] += sums[j];
}

// ---------------------------------------------------------------- 16-bit products

// C[m,n] = op(A) op(B) + beta C, column-major as cublasSgemm takes it, with A and B of the 16-bit `dtype`, C of
// `c_dtype` (fp32, or `dtype`: the fp32 sum rounded once) and fp32 compute.
void gemm_16bit(DType dtype, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* A,
                int lda, const void* B, int ldb, float beta, void* C, DType c_dtype, int ldc, cudaStream_t stream) {
  const cudaDataType_t type = lt_data_type(dtype);
  cublaslt_matmul({transa, transb, m, n, k, 1, "linear", lt_timing(dtype)}, 1.0f, {A, type, lda}, {B, type, ldb}, beta,
                  {C, lt_data_type(c_dtype), ldc}, stream);
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

// dW (fp32, [OC, C] as column-major C x OC) += the 16-bit product of linear_backward, with the bias gradient in its
// epilogue (BGRADB). The epilogue writes its sums, so with `add` they go to `sums` (OC floats), which a kernel then
// adds into dbias; without, dW = the product and the epilogue writes dbias itself (`sums` unused). False, with
// nothing queued, when cuBLASLt has no algorithm with that epilogue.
bool weight_and_bias_gradient(DType dtype, int c, int oc, int n, const void* inp, const void* dout, float* dweight,
                              float* dbias, float* sums, bool add, cudaStream_t stream) {
  const cudaDataType_t type = lt_data_type(dtype);
  static constexpr LtTimingNames kBiasGradient = {"cublasLt matmul+bgrad f32", "cublasLt matmul+bgrad tf32",
                                                  "cublasLt matmul+bgrad bf16", "cublasLt matmul+bgrad f16"};
  LtMatmul mm{CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, 1, "linear_backward", lt_timing(dtype, kBiasGradient)};
  mm.bias_gradient = add ? sums : dbias;
  if (!try_cublaslt_matmul(mm, 1.0f, {inp, type, c}, {dout, type, oc}, add ? 1.0f : 0.0f, {dweight, CUDA_R_32F, c},
                           stream))
    return false;
  if (!add) return true;
  LAB_LAUNCH(add_bias_gradient_kernel, {grid_for(oc, kBlockSize), kBlockSize, 0, stream}, dbias, sums,
             static_cast<int64_t>(oc));
  return true;
}

}  // namespace

// ---------------------------------------------------------------- launchers

void linear_forward(const Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  const int64_t OC = weight.dim(0), C = weight.dim(1);
  LAB_CHECK(C > 0, InvalidArgument, "linear_forward: weight ", shape_str(weight.shape()), " has no input features");
  const int64_t N = inp.numel() / C;
  if (N == 0 || OC == 0) return;
  if (bias.defined() && bias.dtype() != out.dtype()) {  // an fp32 bias needs an fp32 D (see the header)
    MemoryScope workspace(MemCategory::Workspace);
    const Tensor sum = Tensor::empty(out.shape(), DType::F32, out.device());
    linear_forward(sum, inp, weight, bias);
    convert(out, sum);
    return;
  }
  LaunchScope scope(out);
  const int oc = as_blas_int(OC, "out_features"), c = as_blas_int(C, "in_features");
  const cudaDataType_t type = lt_data_type(inp.dtype());
  LtMatmul mm{CUBLAS_OP_T, CUBLAS_OP_N, oc, as_blas_int(N, "rows"), c, 1, "linear_forward", lt_timing(inp.dtype())};
  mm.compute = inp.dtype() == DType::F32 ? lab::cuda::fp32_compute_type() : CUBLAS_COMPUTE_32F;
  if (bias.defined()) mm.bias = {bias.raw(), lt_data_type(bias.dtype())};
  cublaslt_matmul(mm, 1.0f, {weight.raw(), type, c}, {inp.raw(), type, c}, 0.0f,
                  {out.raw(), lt_data_type(out.dtype()), oc}, scope.stream());
}

void linear_backward(const Tensor& dinp, const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                     const Tensor& inp, const Tensor& weight, GradWrite dinp_write, GradWrite dparams_write) {
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
    // beta 0 for Overwrite: cuBLAS then reads nothing of C (its documented rule), so dinp may hold anything.
    const float beta = dinp_write == GradWrite::Add ? 1.0f : 0.0f;
    gemm(inp.dtype(), CUBLAS_OP_N, CUBLAS_OP_N, c, n, oc, weight.raw(), c, product_dout.raw(), oc, beta, dinp.raw(),
         dinp.dtype(), c, scope.stream());
  }
  // The parameters' gradients: added into, or (Overwrite) written over with beta 0, the epilogue's bias sums written
  // straight into dbias and the column sums stored rather than added.
  const bool add_params = dparams_write == GradWrite::Add;
  // With a 16-bit dout, the weight gradient's product gives the bias gradient too (see the header).
  bool bias_done = false;
  if (dweight.defined() && dbias.defined() && inp.dtype() != DType::F32 && dout.dtype() == inp.dtype()) {
    MemoryScope workspace(MemCategory::Workspace);
    const Tensor sums = add_params ? Tensor::empty({OC}, DType::F32, dout.device()) : Tensor();
    bias_done = weight_and_bias_gradient(inp.dtype(), c, oc, n, inp.raw(), dout.raw(), dweight.data<float>(),
                                         dbias.data<float>(), add_params ? sums.data<float>() : nullptr, add_params,
                                         scope.stream());
  }
  if (dweight.defined() && !bias_done) {
    gemm(inp.dtype(), CUBLAS_OP_N, CUBLAS_OP_T, c, oc, n, inp.raw(), c, product_dout.raw(), oc,
         add_params ? 1.0f : 0.0f, dweight.raw(), DType::F32, c, scope.stream());
  }
  if (dbias.defined() && !bias_done) {
    dispatch_float_dtype(dout.dtype(), "linear_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using D = typename DeviceType<T>::type;
      if (!add_column_piece_sums(dbias.data<float>(), device_data<T>(dout), N, OC, dout.device(), scope.stream(),
                                 add_params))
        add_column_sums<1>({{dbias.data<float>()}, add_params}, BiasTerms<D>{device_data<T>(dout), OC}, N, OC,
                           dout.device(), scope.stream());
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
