#include "common/cuda/check.h"

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

}  // namespace lab::cuda
