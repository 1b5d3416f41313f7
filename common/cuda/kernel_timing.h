// A CUDA kernel launch or cuBLAS call timed on the device for the open step profile (common/core/step_profile.h):
// a pair of events recorded around it on its stream, read when the profile closes (after the step, so reading
// them waits for nothing the step still needed). With no profile open it does nothing but one atomic load.
//
// Every LAB_LAUNCH has one (launch.cuh); the cuBLAS and cuBLASLt calls of the ops put one around themselves:
//
//   const KernelTiming timing("cublasLt matmul, 16-bit", stream);
#pragma once

#include <cuda_runtime.h>

namespace lab {
class StepProfile;
}

namespace lab::cuda {

class KernelTiming {
 public:
  // `name` outlives the profile (a literal); `stream` is the one the work is queued on.
  KernelTiming(const char* name, cudaStream_t stream);
  ~KernelTiming();
  KernelTiming(const KernelTiming&) = delete;
  KernelTiming& operator=(const KernelTiming&) = delete;

 private:
  const char* name_;
  cudaStream_t stream_;
  StepProfile* profile_;
  cudaEvent_t start_ = nullptr;
};

}  // namespace lab::cuda
