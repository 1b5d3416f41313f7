// cuBLAS and cuBLASLt, opened by the first call that needs them instead of when a program starts.
//
// Why: loading libcublasLt (about 540 MB, most of it kernels that static initialisers register) costs every
// process about 0.45 s before main() on a 2-core VM, with or without a GPU. Every CPU-only run of a program
// paid it, and so did each CUDA test that skips on a machine without a GPU. So the programs do not link
// cuBLAS: the functions below stand in for the ones the project calls; the first call of any of them opens the
// library (dlopen) and each forwards to the library's own function of the same name. A cuBLAS call added
// elsewhere without a stand-in here fails to link, so this list cannot silently fall behind.
//
// The libraries are looked up by the soname of the toolkit this was compiled against (libcublas.so.13 for
// CUDA 13), along the programs' run path (it names the toolkit's library folder, since they link its runtime)
// and the usual search path, then in the toolkit's library folder known at configure time.
//
// Only the build on the real toolkit compiles this file: the emulation build has its own cuBLAS (emulation/).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "common/core/error.h"

namespace {

enum class Library { Cublas, CublasLt };

// `name` ("libcublas") with the toolkit's major version, e.g. libcublas.so.13.
void* open_library(const std::string& name) {
  const std::string soname = name + ".so." + std::to_string(CUBLAS_VER_MAJOR);
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = dlerror();
  const std::string in_toolkit = std::string(LAB_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  lab::fail(lab::ErrorKind::Cuda, "cannot load ", soname, ", which GEMMs on the GPU need: ", first_error, "; not in ",
            LAB_CUDA_LIBRARY_DIR, " either (put the CUDA toolkit's library folder on LD_LIBRARY_PATH)");
}

// Opened once per process, on first use; a failed open throws and is tried again by the next call.
void* library(Library which) {
  if (which == Library::Cublas) {
    static void* const cublas = open_library("libcublas");
    return cublas;
  }
  static void* const cublaslt = open_library("libcublasLt");
  return cublaslt;
}

// Calls the library's function `name`, of the type of its declaration `declared`; looked up once.
template <auto declared, typename... Args>
auto forward(Library which, const char* name, Args... args) {
  using Function = decltype(declared);
  static const Function real = [&] {
    void* symbol = dlsym(library(which), name);
    LAB_CHECK(symbol != nullptr, Cuda, "the loaded cuBLAS has no ", name, " (", dlerror(), ")");
    return reinterpret_cast<Function>(symbol);
  }();
  return real(args...);
}

}  // namespace

// The stand-ins. Their names are the libraries' exported ones: cublas_v2.h maps cublasCreate to
// cublasCreate_v2 and so on.
#define LAB_FORWARD(library, name, ...) return forward<&name>(Library::library, #name, __VA_ARGS__)

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  LAB_FORWARD(Cublas, cublasCreate_v2, handle);
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  LAB_FORWARD(Cublas, cublasDestroy_v2, handle);
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  LAB_FORWARD(Cublas, cublasSetStream_v2, handle, stream);
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  LAB_FORWARD(Cublas, cublasGetStream_v2, handle, stream);
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  LAB_FORWARD(Cublas, cublasSetWorkspace_v2, handle, workspace, bytes);
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  LAB_FORWARD(Cublas, cublasSetMathMode, handle, mode);
}
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  LAB_FORWARD(Cublas, cublasGetMathMode, handle, mode);
}
const char* cublasGetStatusName(cublasStatus_t status) {
  LAB_FORWARD(Cublas, cublasGetStatusName, status);
}
const char* cublasGetStatusString(cublasStatus_t status) {
  LAB_FORWARD(Cublas, cublasGetStatusString, status);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  LAB_FORWARD(Cublas, cublasSgemm_v2, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC, int batchCount) {
  LAB_FORWARD(Cublas, cublasSgemmStridedBatched, handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,
              strideB, beta, C, ldc, strideC, batchCount);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  LAB_FORWARD(CublasLt, cublasLtCreate, handle);
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  LAB_FORWARD(CublasLt, cublasLtDestroy, handle);
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  LAB_FORWARD(CublasLt, cublasLtMatmul, handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
              workspace, workspace_bytes, stream);
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  LAB_FORWARD(CublasLt, cublasLtMatmulDescCreate, desc, compute, scale);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  LAB_FORWARD(CublasLt, cublasLtMatmulDescDestroy, desc);
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  LAB_FORWARD(CublasLt, cublasLtMatmulDescSetAttribute, desc, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t bytes, size_t* written) {
  LAB_FORWARD(CublasLt, cublasLtMatmulDescGetAttribute, desc, attr, buf, bytes, written);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  LAB_FORWARD(CublasLt, cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  LAB_FORWARD(CublasLt, cublasLtMatrixLayoutDestroy, layout);
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  LAB_FORWARD(CublasLt, cublasLtMatrixLayoutSetAttribute, layout, attr, buf, bytes);
}
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t bytes, size_t* written) {
  LAB_FORWARD(CublasLt, cublasLtMatrixLayoutGetAttribute, layout, attr, buf, bytes, written);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  LAB_FORWARD(CublasLt, cublasLtMatmulPreferenceCreate, preference);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  LAB_FORWARD(CublasLt, cublasLtMatmulPreferenceDestroy, preference);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  LAB_FORWARD(CublasLt, cublasLtMatmulPreferenceSetAttribute, preference, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  LAB_FORWARD(CublasLt, cublasLtMatmulAlgoGetHeuristic, handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference, requested,
              results, returned);
}
