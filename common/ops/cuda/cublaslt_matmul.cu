#include <string>

#include "common/core/error.h"
#include "common/cuda/check.h"
#include "common/cuda/cublas.h"
#include "common/cuda/kernel_timing.h"
#include "common/ops/cuda/cublaslt_matmul.cuh"

namespace lab::ops::cuda {

namespace {

// The descriptors of one cuBLASLt matmul, destroyed at the end of the scope (also when a check throws).
struct LtDescriptors {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtDescriptors() {
    for (cublasLtMatrixLayout_t layout : {a, b, d})
      if (layout) cublasLtMatrixLayoutDestroy(layout);
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

size_t element_bytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : 2;
}

const char* type_name(cudaDataType_t type) {
  return type == CUDA_R_32F ? "f32" : type == CUDA_R_16BF ? "bf16" : "f16";
}

// The layout of `batch` matrices of rows x cols as `m` describes them.
cublasLtMatrixLayout_t layout_of(const LtMatrices& m, int rows, int cols, int batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, m.type, rows, cols, m.ld));
  const int32_t count = batch;
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride,
                                                sizeof(m.stride)));
  return layout;
}

// The largest power of two, up to cuBLASLt's default assumption of 256, that divides `bytes`.
uint32_t alignment_of(uint64_t bytes) {
  uint32_t alignment = 1;
  while (alignment < 256 && bytes % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// The same for the byte address of every matrix of `m`: the first's address and the stride between them.
uint32_t alignment_of(const LtMatrices& m) {
  return alignment_of(reinterpret_cast<uintptr_t>(m.data) | static_cast<uint64_t>(m.stride) * element_bytes(m.type));
}

// cuBLASLt's epilogue for a bias (or none) and `aux`'s activation.
cublasLtEpilogue_t lt_epilogue(const LtMatmul& mm) {
  if (mm.bias_gradient != nullptr) return CUBLASLT_EPILOGUE_BGRADB;
  const bool bias = mm.bias.data != nullptr, aux = mm.epilogue.data != nullptr;
  switch (mm.epilogue.activation) {
    case LtActivation::None: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case LtActivation::Gelu:
      if (aux) return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case LtActivation::GeluGrad: return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The epilogue, with the bias and aux pointers when it has them: set before the heuristic, which reads the
// pointers' alignment.
void set_epilogue(cublasLtMatmulDesc_t desc, const LtMatmul& mm) {
  const LtAux& aux = mm.epilogue;
  LAB_CHECK(aux.activation != LtActivation::GeluGrad || (aux.data != nullptr && mm.bias.data == nullptr),
            InvalidArgument, mm.op, ": GELU's backward epilogue reads an aux matrix and takes no bias");
  LAB_CHECK(aux.data == nullptr || (aux.activation != LtActivation::None && mm.batch == 1), InvalidArgument, mm.op,
            ": an aux matrix goes with a GELU epilogue on one product");
  LAB_CHECK(
      mm.bias_gradient == nullptr || (mm.bias.data == nullptr && aux.activation == LtActivation::None && mm.batch == 1),
      InvalidArgument, mm.op, ": the bias gradient epilogue goes alone, on one product");
  const uint32_t epilogue = lt_epilogue(mm);
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (mm.bias.data != nullptr) {
    const int32_t type = mm.bias.type;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm.bias.data, sizeof(mm.bias.data)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)));
  }
  if (mm.bias_gradient != nullptr)  // its type is D's (no BIAS_DATA_TYPE)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &mm.bias_gradient,
                                                sizeof(mm.bias_gradient)));
  if (aux.data != nullptr) {
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.data, sizeof(aux.data)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux.ld, sizeof(aux.ld)));
  }
}

// The preference: at most the stream's cuBLAS workspace, and the operands' real alignments (C is D). A split-K
// algorithm keeps its partial sums in f32 (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE): by default cuBLASLt may add
// them up in D's type (cublasLt.h, cublasLtReductionScheme_t), and for a 16-bit D that rounds every partial sum
// to 16 bits. Algorithms that do not split k stay allowed.
void set_preference(cublasLtMatmulPreference_t preference, const lab::cuda::BlasWorkspace& workspace,
                    const LtMatrices& a, const LtMatrices& b, const LtMatrices& d) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace.bytes, sizeof(workspace.bytes)));
  const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                    sizeof(reductions)));
  const uint32_t alignments[] = {alignment_of(a), alignment_of(b), alignment_of(d), alignment_of(d)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, alignment_attributes[i], &alignments[i],
                                                      sizeof(alignments[i])));
}

}  // namespace

cudaDataType_t lt_data_type(DType dtype) {
  return dtype == DType::BF16 ? CUDA_R_16BF : dtype == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
}

const char* lt_timing(DType dtype, const LtTimingNames& names) {
  if (dtype == DType::F32) return lab::cuda::tf32_enabled() ? names.tf32 : names.f32;
  return dtype == DType::BF16 ? names.bf16 : names.f16;
}

namespace {

// One matmul; false, with nothing queued, when the heuristic finds no algorithm (found none, or says the
// configuration is not supported).
bool run_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                const LtMatrices& d, cudaStream_t stream) {
  LtDescriptors lt;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.desc, mm.compute, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &mm.op_a, sizeof(mm.op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSB, &mm.op_b, sizeof(mm.op_b)));
  set_epilogue(lt.desc, mm);
  // Stored shapes: op(A) is m x k, op(B) is k x n.
  const bool a_plain = mm.op_a == CUBLAS_OP_N, b_plain = mm.op_b == CUBLAS_OP_N;
  lt.a = layout_of(a, a_plain ? mm.m : mm.k, a_plain ? mm.k : mm.m, mm.batch);
  lt.b = layout_of(b, b_plain ? mm.k : mm.n, b_plain ? mm.n : mm.k, mm.batch);
  lt.d = layout_of(d, mm.m, mm.n, mm.batch);
  const lab::cuda::BlasWorkspace workspace = lab::cuda::blas_workspace();
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&lt.preference));
  set_preference(lt.preference, workspace, a, b, d);
  const cublasLtHandle_t handle = lab::cuda::cublaslt_handle();
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, lt.desc, lt.a, lt.b, lt.d, lt.d, lt.preference, 1, &heuristic, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  CUBLAS_CHECK(status);
  if (found == 0) return false;
  const lab::cuda::KernelTiming timing(mm.timing, stream);
  void* out = const_cast<void*>(d.data);
  CUBLAS_CHECK(cublasLtMatmul(handle, lt.desc, &alpha, a.data, lt.a, b.data, lt.b, &beta, out, lt.d, out, lt.d,
                              &heuristic.algo, workspace.data, workspace.bytes, stream));
  return true;
}

}  // namespace

void cublaslt_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                     const LtMatrices& d, cudaStream_t stream) {
  const auto aligned = [](const void* p) { return alignment_of(reinterpret_cast<uintptr_t>(p)); };
  LAB_CHECK(
      run_matmul(mm, alpha, a, b, beta, d, stream), Unsupported, mm.op, ": cuBLASLt has no algorithm for ", mm.batch,
      " ", type_name(a.type), " product(s) of ", mm.m, " x ", mm.k, " and ", mm.k, " x ", mm.n, " into ",
      type_name(d.type),
      mm.bias.data ? cat(" with a bias aligned to ", aligned(mm.bias.data), " bytes") : std::string(),
      mm.epilogue.data ? cat(" and a GELU epilogue's aux matrix aligned to ", aligned(mm.epilogue.data), " bytes")
                       : std::string(),
      mm.bias_gradient ? cat(" with a bias gradient aligned to ", aligned(mm.bias_gradient), " bytes") : std::string());
}

bool try_cublaslt_matmul(const LtMatmul& mm, float alpha, const LtMatrices& a, const LtMatrices& b, float beta,
                         const LtMatrices& d, cudaStream_t stream) {
  return run_matmul(mm, alpha, a, b, beta, d, stream);
}

}  // namespace lab::ops::cuda
