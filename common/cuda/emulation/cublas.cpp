// The cuBLAS stand-in: handles, their stream, workspace and math mode, and SGEMM (plain and strided
// batched), checked as cuBLAS checks its arguments and computed by gemm.h on the handle's stream.
#include <cublas_v2.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include "common/cuda/emulation/blas_operands.h"
#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/dry_run.h"
#include "common/cuda/emulation/gemm.h"
#include "common/cuda/emulation/streams.h"

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;  // the legacy stream until cublasSetStream
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace {

using namespace lab::cuda::emu;

std::mutex g_handles_mutex;
std::set<cublasContext*> g_handles;

bool live(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  return g_handles.contains(handle);
}

bool valid_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;  // C is T for real matrices
}

struct StatusText {
  cublasStatus_t status;
  const char* name;
  const char* description;
};

constexpr StatusText kStatuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "the functionality requested requires some license"},
};

const StatusText* find(cublasStatus_t status) {
  for (const StatusText& s : kStatuses)
    if (s.status == status) return &s;
  return nullptr;
}

// The checks and the launch shared by the plain and the batched SGEMM.
cublasStatus_t sgemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                     int n, int k, const float* alpha, const float* A, int lda, long long stride_a, const float* B,
                     int ldb, long long stride_b, const float* beta, float* C, int ldc, long long stride_c, int batch) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_op(transa) || !valid_op(transb) || m < 0 || n < 0 || k < 0 || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const int rows_a = transa == CUBLAS_OP_N ? m : k, cols_a = transa == CUBLAS_OP_N ? k : m;
  const int rows_b = transb == CUBLAS_OP_N ? k : n, cols_b = transb == CUBLAS_OP_N ? n : k;
  if (lda < std::max(1, rows_a) || ldb < std::max(1, rows_b) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const float a = *alpha, b = *beta;  // host pointer mode: read now
  if (m == 0 || n == 0 || batch == 0 || ((a == 0.0f || k == 0) && b == 1.0f)) return CUBLAS_STATUS_SUCCESS;
  CUstream_st* stream = resolve_stream(handle->stream);
  if (stream == nullptr || sticky_error(handle->device) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  const bool reads_ab = a != 0.0f && k > 0;
  if ((reads_ab &&
       (!check_operand(handle->device, call, "A", A, sizeof(float), rows_a, cols_a, lda, batch, stride_a) ||
        !check_operand(handle->device, call, "B", B, sizeof(float), rows_b, cols_b, ldb, batch, stride_b))) ||
      !check_operand(handle->device, call, "C", C, sizeof(float), m, n, ldc, batch, stride_c))
    return CUBLAS_STATUS_SUCCESS;  // as on a GPU, the call is queued and the fault surfaces later

  GemmProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = batch;
  p.alpha = a;
  p.beta = b;
  p.a = GemmInput{A, Element::F32, lda, stride_a, transa != CUBLAS_OP_N};
  p.b = GemmInput{B, Element::F32, ldb, stride_b, transb != CUBLAS_OP_N};
  p.c = C;
  p.ldc = ldc;
  p.c_batch_stride = stride_c;
  p.d = GemmOutput{C, Element::F32, ldc, stride_c};
  p.tf32 = (handle->mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH;
  if (dry_run()) {
    enqueue(*stream, [] {});  // checked, not run (dry_run.h)
    return CUBLAS_STATUS_SUCCESS;
  }
  enqueue(*stream, [p] { run_gemm(p); });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

const char* cublasGetStatusName(cublasStatus_t status) {
  const StatusText* s = find(status);
  return s ? s->name : "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  const StatusText* s = find(status);
  return s ? s->description : "unknown error";
}

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const int device = current_device();
  if (!valid_device(device)) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto context = std::make_unique<cublasContext>();
  context->device = device;
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  *handle = context.get();
  g_handles.insert(context.release());
  return CUBLAS_STATUS_SUCCESS;
}

// Waits for the device, as cublasDestroy does, before letting the handle go.
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  synchronize_device(handle->device, "cublasDestroy");
  std::lock_guard<std::mutex> lock(g_handles_mutex);
  g_handles.erase(handle);
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  handle->workspace = nullptr;  // as in cuBLAS: a new stream goes back to the default workspace
  handle->workspace_bytes = 0;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

// The emulated GEMM needs no scratch memory; the workspace is checked (256-byte alignment) and kept.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 256 != 0))
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const unsigned base = mode & 0xfu, flags = mode & ~0xfu;
  if (base > CUBLAS_TF32_TENSOR_OP_MATH ||
      (flags & ~static_cast<unsigned>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) != 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!live(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  return sgemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int stride_a, const float* B, int ldb, long long int stride_b,
                                         const float* beta, float* C, int ldc, long long int stride_c,
                                         int batch_count) {
  return sgemm("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, stride_a, B, ldb, stride_b,
               beta, C, ldc, stride_c, batch_count);
}
