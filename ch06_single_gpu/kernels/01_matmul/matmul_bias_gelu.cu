// CUDA path of ch06_single_gpu/matmul_bias_gelu.h: one cuBLASLt matmul with the epilogue fused.
//
// cuBLASLt is column-major and our tensors are row-major. A row-major [R, C] matrix is the same memory as a
// column-major [C, R] one, so the row-major out[M,N] = a[M,K] @ op(b) is issued as the column-major
// out^T[N,M] = op(b)^T a^T:
//   first operand   b: row-major [K,N] is column-major N x K (ld N, no transpose); row-major [N,K] (a Linear's
//                   weight) is column-major K x N (ld K), transposed
//   second operand  a: row-major [M,K] is column-major K x M (ld K), no transpose
//   result          column-major N x M (ld N); the bias has one entry per row of it (N), as cuBLASLt wants; the
//                   aux output (pre_gelu) has the result's layout (ld N)
// cuBLASLt picks its kernel by a heuristic for these shapes, types and epilogue; the workspace is the stream's
// (common/cuda/cublas.h). When it has no kernel for a combination (alignment of odd shapes with an aux
// output, on some GPUs), the call fails with an Unsupported error naming the shapes.
#include <cublasLt.h>

#include <cstdint>

#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/cuda/cublas.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::cuda {

namespace {

cudaDataType_t cuda_type(DType dtype) {
  return dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

cublasLtEpilogue_t lt_epilogue(Epilogue epilogue, bool aux) {
  switch (epilogue) {
    case Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::Gelu: return aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
    case Epilogue::BiasGelu: return aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The descriptors of one matmul, destroyed at the end of the scope (also when a check throws).
class LtMatmul {
 public:
  explicit LtMatmul(cublasComputeType_t compute) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
  }
  ~LtMatmul() {
    for (cublasLtMatrixLayout_t layout : layouts_) cublasLtMatrixLayoutDestroy(layout);
    if (preference_) cublasLtMatmulPreferenceDestroy(preference_);
    cublasLtMatmulDescDestroy(desc_);
  }
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, attribute, &value, sizeof(value)));
  }
  cublasLtMatrixLayout_t layout(DType dtype, int64_t rows, int64_t cols, int64_t ld) {
    cublasLtMatrixLayout_t layout = nullptr;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, cuda_type(dtype), static_cast<uint64_t>(rows),
                                            static_cast<uint64_t>(cols), ld));
    layouts_[count_++] = layout;
    return layout;
  }
  cublasLtMatmulDesc_t desc() const { return desc_; }
  cublasLtMatmulPreference_t preference(size_t workspace_bytes) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof(workspace_bytes)));
    // Split-K parts summed in f32, not in a 16-bit output's type (common/ops/cuda/cublaslt_matmul.cu says why).
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference_, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                      &reductions, sizeof(reductions)));
    return preference_;
  }

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  cublasLtMatrixLayout_t layouts_[3] = {};
  int count_ = 0;
};

}  // namespace

void matmul_epilogue(const Tensor& out, const Tensor& pre_gelu, const Tensor& a, const Tensor& b, bool b_transposed,
                     const Tensor& bias, Epilogue epilogue) {
  const int64_t M = a.dim(0), K = a.dim(1), N = out.dim(1);
  ops::cuda::LaunchScope scope(out);
  // fp32 inputs follow the process-wide TF32 switch; bf16 inputs always accumulate in strict fp32.
  LtMatmul mm(a.dtype() == DType::F32 ? lab::cuda::fp32_compute_type() : CUBLAS_COMPUTE_32F);
  const int32_t transa = b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, transb = CUBLAS_OP_N;
  mm.set(CUBLASLT_MATMUL_DESC_TRANSA, transa);
  mm.set(CUBLASLT_MATMUL_DESC_TRANSB, transb);
  const uint32_t lt = lt_epilogue(epilogue, pre_gelu.defined());
  mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE, lt);
  if (bias.defined()) mm.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.raw());
  if (pre_gelu.defined()) {
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre_gelu.raw());
    mm.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, N);
  }
  const cublasLtMatrixLayout_t b_layout = b_transposed ? mm.layout(b.dtype(), K, N, K) : mm.layout(b.dtype(), N, K, N);
  const cublasLtMatrixLayout_t a_layout = mm.layout(a.dtype(), K, M, K);
  const cublasLtMatrixLayout_t out_layout = mm.layout(out.dtype(), N, M, N);  // C (unread: beta = 0) and D

  const lab::cuda::BlasWorkspace workspace = lab::cuda::blas_workspace();
  const cublasLtHandle_t handle = lab::cuda::cublaslt_handle();
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, mm.desc(), b_layout, a_layout, out_layout, out_layout,
                                              mm.preference(workspace.bytes), 1, &heuristic, &found));
  LAB_CHECK(found > 0, Unsupported, "matmul_epilogue: cuBLASLt has no algorithm for ", M, " x ", K, " @ ",
            b_transposed ? "[N,K]^T" : "[K,N]", " with N = ", N, ", ", dtype_name(a.dtype()), " inputs, ",
            dtype_name(out.dtype()), " output, epilogue ", epilogue_name(epilogue), pre_gelu.defined() ? " + aux" : "");
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle, mm.desc(), &alpha, b.raw(), b_layout, a.raw(), a_layout, &beta, out.raw(),
                              out_layout, out.raw(), out_layout, &heuristic.algo, workspace.data, workspace.bytes,
                              scope.stream()));
}

}  // namespace lab::ch06::cuda
