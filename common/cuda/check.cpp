#include "common/cuda/check.h"

#include <cstdlib>
#include <cstring>

#include "common/core/error.h"

namespace lab::cuda {

void throw_cuda_error(cudaError_t error, const char* statement, const char* file, int line) {
  fail(ErrorKind::Cuda, "CUDA error: ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ") in `", statement,
       "` at ", file, ":", line);
}

void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file, int line) {
  fail(ErrorKind::Cuda, "cuBLAS error: ", cublasGetStatusName(status), " (", cublasGetStatusString(status), ") in `",
       statement, "` at ", file, ":", line);
}

bool sync_after_launch() {
  static const bool enabled = [] {
    const char* value = std::getenv("LAB_CUDA_SYNC_LAUNCH");
    return value != nullptr && std::strcmp(value, "0") != 0 && value[0] != '\0';
  }();
  return enabled;
}

bool finished(cudaError_t status, const char* statement, const char* file, int line) {
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) throw_cuda_error(status, statement, file, line);
  if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();
  return false;
}

void check_launch(const char* kernel) {
  const cudaError_t launch_error = cudaGetLastError();
  if (launch_error != cudaSuccess) {
    // Without the switch, a fault raised while an earlier kernel ran is sticky and shows up here too.
    fail(ErrorKind::Cuda, "CUDA error: ", cudaGetErrorName(launch_error), " (", cudaGetErrorString(launch_error),
         ") launching kernel ", kernel,
         sync_after_launch() ? ""
                             : " (or raised by an earlier kernel: LAB_CUDA_SYNC_LAUNCH=1 names the one that faulted)");
  }
  if (!sync_after_launch()) return;
  const cudaError_t run_error = cudaDeviceSynchronize();
  if (run_error != cudaSuccess)
    fail(ErrorKind::Cuda, "CUDA error: ", cudaGetErrorName(run_error), " (", cudaGetErrorString(run_error),
         ") raised by kernel ", kernel, " (LAB_CUDA_SYNC_LAUNCH=1)");
}

}  // namespace lab::cuda
