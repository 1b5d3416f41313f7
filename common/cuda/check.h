// Error checks for CUDA and cuBLAS calls: every failure becomes a lab::Error(ErrorKind::Cuda) that names
// the failing statement, the error and file:line, so a broken launch deep inside a training step reads as
//
//     CUDA error: cudaErrorInvalidConfiguration (invalid configuration argument) in
//     `cudaGetLastError()` at common/ops/cuda/gelu.cu:41
//
// Kernel launches report configuration errors only through cudaGetLastError, so every launch is followed
// by check_launch() (LAB_LAUNCH does it). Errors raised by a kernel while it runs surface at the next
// synchronising call, or at once with LAB_CUDA_SYNC_LAUNCH=1.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace lab::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* statement, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file, int line);

// After every kernel launch (LAB_LAUNCH in launch.cuh calls it): a bad launch configuration is an
// Error naming `kernel`. With LAB_CUDA_SYNC_LAUNCH=1 in the environment it also synchronises the device
// and reports a fault raised while the kernel ran as this kernel's.
void check_launch(const char* kernel);

// True when LAB_CUDA_SYNC_LAUNCH=1 is set (read once).
bool sync_after_launch();

// The answer of a non-blocking completion query (cudaStreamQuery, cudaEventQuery): true when the work has
// finished, false for cudaErrorNotReady, an Error naming `statement` for anything else. "Not ready" is an
// answer, not a failure: when the runtime left it behind as the thread's last error it is cleared, so a
// later launch check does not report it; any other pending error (one this query did not cause) is left
// in place for the check that owns it.
bool finished(cudaError_t status, const char* statement, const char* file, int line);

}  // namespace lab::cuda

#define CUDA_CHECK(statement)                                                         \
  do {                                                                                \
    const cudaError_t lab_cuda_error_ = (statement);                                  \
    if (lab_cuda_error_ != cudaSuccess)                                               \
      ::lab::cuda::throw_cuda_error(lab_cuda_error_, #statement, __FILE__, __LINE__); \
  } while (0)

// True when the queried work has finished; see finished() above.
#define CUDA_QUERY(statement) ::lab::cuda::finished((statement), #statement, __FILE__, __LINE__)

// cuBLAS and cuBLASLt share one status type, so this checks both.
#define CUBLAS_CHECK(statement)                                                            \
  do {                                                                                     \
    const cublasStatus_t lab_cublas_status_ = (statement);                                 \
    if (lab_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                       \
      ::lab::cuda::throw_cublas_error(lab_cublas_status_, #statement, __FILE__, __LINE__); \
  } while (0)
