// The cuBLASLt stand-in (see include/cublasLt.h for what it supports): descriptors with their attributes, a
// one-algorithm heuristic, and cublasLtMatmul computed by gemm.h on the given stream.
#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/cuda/emulation/blas_operands.h"
#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/dry_run.h"
#include "common/cuda/emulation/gemm.h"
#include "common/cuda/emulation/streams.h"

struct cublasLtContext {
  int device = 0;
};

struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute_type = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  int32_t pointer_mode = 0;  // host
  int32_t transa = CUBLAS_OP_N;
  int32_t transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = -1;  // -1: D's type
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int64_t aux_batch_stride = 0;
};

struct cublasLtMatrixLayoutOpaque {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct cublasLtMatmulPreferenceOpaque {
  uint32_t search_mode = 0;
  uint64_t max_workspace = 0;
  uint32_t reduction_schemes = CUBLASLT_REDUCTION_SCHEME_MASK;  // every scheme allowed, as in cuBLASLt
};

namespace {

using namespace lab::cuda::emu;

// Copies an attribute's value in or out; the buffer must have the attribute's exact size.
template <typename T>
cublasStatus_t set_value(T& field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t get_value(const T& field, void* buf, size_t size, size_t* written) {
  if (written) *written = sizeof(T);
  if (size == 0 && buf == nullptr) return CUBLAS_STATUS_SUCCESS;  // a query of the size alone
  if (buf == nullptr || size < sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

bool to_element(uint32_t type, Element* out) {
  switch (type) {
    case CUDA_R_32F: *out = Element::F32; return true;
    case CUDA_R_16F: *out = Element::F16; return true;
    case CUDA_R_16BF: *out = Element::BF16; return true;
    default: return false;
  }
}

size_t element_bytes(Element type) {
  return type == Element::F32 ? 4 : 2;
}

bool fp32_accumulation(cublasComputeType_t type) {
  return type == CUBLAS_COMPUTE_32F || type == CUBLAS_COMPUTE_32F_PEDANTIC || type == CUBLAS_COMPUTE_32F_FAST_TF32 ||
         type == CUBLAS_COMPUTE_32F_FAST_16F || type == CUBLAS_COMPUTE_32F_FAST_16BF;
}

// The epilogue's pieces: bias or not, aux matrix or not (an output, but DGELU's input), which activation, and
// whether the bias pointer instead receives the bias gradient of B (BGRADB); false when not supported.
struct EpilogueParts {
  bool bias = false;
  bool aux = false;
  Activation activation = Activation::None;
  bool bias_gradient = false;
};

bool epilogue_parts(uint32_t epilogue, EpilogueParts* out) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: *out = {false, false, Activation::None}; return true;
    case CUBLASLT_EPILOGUE_RELU: *out = {false, false, Activation::Relu}; return true;
    case CUBLASLT_EPILOGUE_BIAS: *out = {true, false, Activation::None}; return true;
    case CUBLASLT_EPILOGUE_RELU_BIAS: *out = {true, false, Activation::Relu}; return true;
    case CUBLASLT_EPILOGUE_GELU: *out = {false, false, Activation::Gelu}; return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS: *out = {true, false, Activation::Gelu}; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX: *out = {false, true, Activation::Gelu}; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: *out = {true, true, Activation::Gelu}; return true;
    case CUBLASLT_EPILOGUE_DGELU: *out = {false, true, Activation::GeluGrad}; return true;
    case CUBLASLT_EPILOGUE_BGRADB: *out = {false, false, Activation::None, true}; return true;
    default: return false;
  }
}

// The alignment a bias at `bias` offers an algorithm: the largest power of two dividing its address, up to 16
// bytes (the widest load, 128 bits). The heuristic reads the bias pointer to learn it (cublasLt.h: routines that
// do not dereference the pointer "depend on its value to determine expected pointer alignment"), records it in
// the algorithm it returns, and cublasLtMatmul refuses that algorithm a less aligned bias, as a GPU kernel
// chosen for 16-byte loads cannot read a bias aligned to 4 bytes. A bias not set yet (null, address 0), or set
// after the heuristic ran without the bias epilogue, counts as aligned to anything: set it before the heuristic.
uint64_t bias_alignment(const void* bias) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(bias);
  uint64_t alignment = 1;
  while (alignment < 16 && address % (2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// A matmul's shapes and types, checked; everything but the data pointers.
struct Plan {
  GemmProblem problem;
  EpilogueParts parts;
  const cublasLtMatrixLayoutOpaque* a = nullptr;
  const cublasLtMatrixLayoutOpaque* b = nullptr;
  const cublasLtMatrixLayoutOpaque* c = nullptr;
  const cublasLtMatrixLayoutOpaque* d = nullptr;
};

// Split-K in D's type. For a product with a long k, cuBLASLt may split k among blocks and add up their partial sums
// in D's type (CUBLASLT_REDUCTION_SCHEME_INPLACE or _OUTPUT_TYPE, cublasLt.h), which for a 16-bit D rounds each
// partial sum to 16 bits. Which shapes its heuristic splits is not documented, so the stand-in errs on the strict side:
// whenever the preference allows such a reduction, a 16-bit D and k of at least 32 take two halves of k, the first
// rounded to D's type, the second added onto it. A preference that allows only CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
// (f32 partial sums) never splits here.
bool splits_in_output_type(const GemmProblem& p, uint32_t allowed_schemes) {
  const uint32_t in_output_type = CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  return (allowed_schemes & in_output_type) != 0 && p.d.type != Element::F32 && p.k >= 32;
}

// op(X)'s columns (A) or rows (B) from `from` on: the operand's data moved that far along k.
GemmInput k_from(GemmInput x, int64_t from, bool is_a) {
  const bool along_ld = is_a ? !x.transposed : x.transposed;  // k runs along the leading dimension's stride
  const int64_t elements = along_ld ? from * x.ld : from;
  x.data = static_cast<const char*>(x.data) + elements * static_cast<int64_t>(element_bytes(x.type));
  return x;
}

void run_split_in_output_type(const GemmProblem& p) {
  GemmProblem first = p, second = p;
  const int64_t half = p.k / 2 / 16 * 16;  // a multiple of the tensor cores' k
  first.k = half;
  first.epilogue = GemmEpilogue{};  // bias and activation apply once, to the sum
  second.k = p.k - half;
  second.a = k_from(p.a, half, true);
  second.b = k_from(p.b, half, false);
  second.beta = 1.0f;
  second.c = p.d.data;
  second.ldc = p.d.ld;
  second.c_batch_stride = p.d.batch_stride;
  run_gemm(first);  // D = alpha A1 B1 + beta C, rounded to D's type
  run_gemm(second);
}

cublasStatus_t make_plan(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, Plan* plan) {
  if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  GemmProblem& p = plan->problem;
  Element type_c;
  if (desc->scale_type != CUDA_R_32F || !fp32_accumulation(desc->compute_type) || desc->pointer_mode != 0 ||
      !to_element(a->type, &p.a.type) || !to_element(b->type, &p.b.type) || !to_element(c->type, &type_c) ||
      !to_element(d->type, &p.d.type) || type_c != p.d.type || !epilogue_parts(desc->epilogue, &plan->parts))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const auto* layout : {a, b, c, d})
    if (layout->order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
  const auto op_ok = [](int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; };
  if (!op_ok(desc->transa) || !op_ok(desc->transb)) return CUBLAS_STATUS_NOT_SUPPORTED;
  p.a.transposed = desc->transa == CUBLAS_OP_T;
  p.b.transposed = desc->transb == CUBLAS_OP_T;
  const uint64_t m = d->rows, n = d->cols;
  const uint64_t k = p.a.transposed ? a->rows : a->cols;
  const bool shapes_agree = (p.a.transposed ? a->cols : a->rows) == m && (p.b.transposed ? b->cols : b->rows) == k &&
                            (p.b.transposed ? b->rows : b->cols) == n && c->rows == m && c->cols == n;
  const bool batches_agree = a->batch == d->batch && b->batch == d->batch && c->batch == d->batch && d->batch >= 1;
  if (!shapes_agree || !batches_agree) return CUBLAS_STATUS_INVALID_VALUE;
  for (const auto* layout : {a, b, c, d})
    if (layout->ld < std::max<int64_t>(1, static_cast<int64_t>(layout->rows))) return CUBLAS_STATUS_INVALID_VALUE;
  const EpilogueParts& e = plan->parts;
  if (e.aux && desc->aux_ld < static_cast<int64_t>(std::max<uint64_t>(1, m))) return CUBLAS_STATUS_INVALID_VALUE;
  // The bias has D's type: cuBLASLt's header allows another (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) only for integer
  // and fp8 products, which the stand-in does not have. Its elements must be aligned to their size (no kernel reads
  // a float at an odd address).
  p.epilogue.bias_type = p.d.type;
  Element bias_type = p.d.type;
  if (desc->bias_type >= 0 &&
      (!to_element(static_cast<uint32_t>(desc->bias_type), &bias_type) || bias_type != p.d.type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool has_bias_pointer = plan->parts.bias || plan->parts.bias_gradient;
  if (has_bias_pointer && reinterpret_cast<uintptr_t>(desc->bias) % element_bytes(bias_type) != 0)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The bias gradient (BGRADB) is one vector, the column sums of op(B): batches are not supported here.
  if (plan->parts.bias_gradient && d->batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
  p.m = static_cast<int64_t>(m);
  p.n = static_cast<int64_t>(n);
  p.k = static_cast<int64_t>(k);
  p.batch = d->batch;
  p.a.ld = a->ld;
  p.a.batch_stride = a->stride;
  p.b.ld = b->ld;
  p.b.batch_stride = b->stride;
  p.ldc = c->ld;
  p.c_batch_stride = c->stride;
  p.d.ld = d->ld;
  p.d.batch_stride = d->stride;
  p.tf32 = desc->compute_type == CUBLAS_COMPUTE_32F_FAST_TF32;
  p.epilogue.activation = e.activation;
  p.epilogue.bias_batch_stride = desc->bias_batch_stride;
  p.epilogue.aux_ld = desc->aux_ld;
  p.epilogue.aux_batch_stride = desc->aux_batch_stride;
  plan->a = a;
  plan->b = b;
  plan->c = c;
  plan->d = d;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const int device = current_device();
  if (!valid_device(device)) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = new cublasLtContext{device};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque;
  (*desc)->compute_type = compute_type;
  (*desc)->scale_type = scale_type;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return set_value(desc->compute_type, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return set_value(desc->scale_type, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set_value(desc->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA: return set_value(desc->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set_value(desc->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set_value(desc->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set_value(desc->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return set_value(desc->bias_batch_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set_value(desc->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set_value(desc->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return set_value(desc->aux_batch_stride, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set_value(desc->bias_type, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t size, size_t* written) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return get_value(desc->compute_type, buf, size, written);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return get_value(desc->scale_type, buf, size, written);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return get_value(desc->pointer_mode, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSA: return get_value(desc->transa, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSB: return get_value(desc->transb, buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return get_value(desc->epilogue, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return get_value(desc->bias, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return get_value(desc->bias_batch_stride, buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return get_value(desc->aux, buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return get_value(desc->aux_ld, buf, size, written);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return get_value(desc->aux_batch_stride, buf, size, written);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return get_value(desc->bias_type, buf, size, written);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque;
  (*layout)->type = static_cast<uint32_t>(type);
  (*layout)->rows = rows;
  (*layout)->cols = cols;
  (*layout)->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return set_value(layout->type, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set_value(layout->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return set_value(layout->rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return set_value(layout->cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return set_value(layout->ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set_value(layout->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set_value(layout->stride, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t size, size_t* written) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return get_value(layout->type, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return get_value(layout->order, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return get_value(layout->rows, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return get_value(layout->cols, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_LD: return get_value(layout->ld, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return get_value(layout->batch, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return get_value(layout->stride, buf, size, written);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return set_value(pref->search_mode, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set_value(pref->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return set_value(pref->reduction_schemes, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
      uint32_t bytes = 0;  // checked like any uint32_t attribute; the one algorithm works at any alignment
      return set_value(bytes, buf, size);
    }
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested_count,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned_count) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (pref == nullptr || requested_count < 1 || results == nullptr || returned_count == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned_count = 0;
  Plan plan;
  if (const cublasStatus_t status = make_plan(desc, a_desc, b_desc, c_desc, d_desc, &plan);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  results[0] = cublasLtMatmulHeuristicResult_t{};  // the one algorithm: no workspace
  results[0].algo.data[0] = bias_alignment(desc->bias);
  results[0].algo.data[1] = splits_in_output_type(plan.problem, pref->reduction_schemes);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned_count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t a_desc, const void* B, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t c_desc, void* D,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* /*workspace*/,
                              size_t /*workspace_bytes*/, cudaStream_t stream_handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Plan plan;
  if (const cublasStatus_t status = make_plan(desc, a_desc, b_desc, c_desc, d_desc, &plan);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  GemmProblem& p = plan.problem;
  std::memcpy(&p.alpha, alpha, sizeof(float));  // host pointer mode, fp32 scale type: read now
  std::memcpy(&p.beta, beta, sizeof(float));
  // In place (C = D) needs C's layout to be D's.
  if (C == D && (plan.c->ld != plan.d->ld || plan.c->stride != plan.d->stride)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool has_bias_pointer = plan.parts.bias || plan.parts.bias_gradient;
  if ((has_bias_pointer && desc->bias == nullptr) || (plan.parts.aux && desc->aux == nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  // An algorithm the heuristic chose for a bias of some alignment may read it in loads that wide.
  if (has_bias_pointer && algo != nullptr && bias_alignment(desc->bias) < algo->data[0])
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The bias gradient is documented as the sum of B's elements over k, which is the sum of op(A) op(B)'s gradient
  // only with alpha 1; what cuBLASLt does with another alpha is not documented, so the stand-in refuses it.
  if (plan.parts.bias_gradient && p.alpha != 1.0f) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  CUstream_st* stream = resolve_stream(stream_handle);
  if (stream == nullptr || sticky_error(handle->device) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;

  const int device = handle->device;
  const char* call = "cublasLtMatmul";
  const size_t out_bytes = element_bytes(p.d.type);
  const int64_t rows_a = p.a.transposed ? p.k : p.m, cols_a = p.a.transposed ? p.m : p.k;
  const int64_t rows_b = p.b.transposed ? p.n : p.k, cols_b = p.b.transposed ? p.k : p.n;
  const bool reads_ab = p.alpha != 0.0f && p.k > 0;
  const bool operands_ok =
      (!reads_ab || (check_operand(device, call, "A", A, element_bytes(p.a.type), rows_a, cols_a, p.a.ld, p.batch,
                                   p.a.batch_stride) &&
                     check_operand(device, call, "B", B, element_bytes(p.b.type), rows_b, cols_b, p.b.ld, p.batch,
                                   p.b.batch_stride))) &&
      (p.beta == 0.0f || check_operand(device, call, "C", C, out_bytes, p.m, p.n, p.ldc, p.batch, p.c_batch_stride)) &&
      check_operand(device, call, "D", D, out_bytes, p.m, p.n, p.d.ld, p.batch, p.d.batch_stride) &&
      (!plan.parts.bias || check_operand(device, call, "bias", desc->bias, element_bytes(p.epilogue.bias_type), p.m, 1,
                                         p.m, p.batch, desc->bias_batch_stride)) &&
      (!plan.parts.aux || check_operand(device, call, "aux", desc->aux, out_bytes, p.m, p.n, desc->aux_ld, p.batch,
                                        desc->aux_batch_stride)) &&
      (!plan.parts.bias_gradient || check_operand(device, call, "bias gradient", desc->bias,
                                                  element_bytes(p.epilogue.bias_type), p.n, 1, p.n, 1, 0));
  if (!operands_ok) return CUBLAS_STATUS_SUCCESS;  // as on a GPU, the fault surfaces at the next synchronisation

  p.a.data = A;
  p.b.data = B;
  p.c = C;
  p.d.data = D;
  p.epilogue.bias = plan.parts.bias ? desc->bias : nullptr;
  p.epilogue.aux = plan.parts.aux ? desc->aux : nullptr;
  // Without an algorithm, cuBLASLt picks one with the default preference, which allows every reduction.
  const bool split = algo != nullptr ? algo->data[1] != 0 : splits_in_output_type(p, CUBLASLT_REDUCTION_SCHEME_MASK);
  void* bias_gradient = plan.parts.bias_gradient ? const_cast<void*>(desc->bias) : nullptr;
  if (dry_run()) {
    enqueue(*stream, [] {});  // checked, not run (dry_run.h)
    return CUBLAS_STATUS_SUCCESS;
  }
  enqueue(*stream, [p, split, bias_gradient] {
    if (split)
      run_split_in_output_type(p);
    else
      run_gemm(p);
    // The bias gradient reads B only (p.b: the whole of k, whichever way the product was split).
    if (bias_gradient != nullptr) column_sums_of_b(p.b, p.k, p.n, bias_gradient, p.epilogue.bias_type);
  });
  return CUBLAS_STATUS_SUCCESS;
}
