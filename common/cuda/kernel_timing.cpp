// Device-side timing of kernels and cuBLAS calls for the step profile (see kernel_timing.h).
#include "common/cuda/kernel_timing.h"

#include "common/core/step_profile.h"
#include "common/cuda/check.h"

namespace lab::cuda {

KernelTiming::KernelTiming(const char* name, cudaStream_t stream)
    : name_(name), stream_(stream), profile_(StepProfile::open_profile()) {
  if (!profile_) return;
  CUDA_CHECK(cudaEventCreate(&start_));
  CUDA_CHECK(cudaEventRecord(start_, stream_));
}

KernelTiming::~KernelTiming() {
  if (!profile_) return;
  cudaEvent_t end = nullptr;
  // A destructor must not throw: a failure here loses this one row, and the profile says nothing false.
  if (cudaEventCreate(&end) != cudaSuccess || cudaEventRecord(end, stream_) != cudaSuccess) {
    cudaEventDestroy(start_);
    if (end) cudaEventDestroy(end);
    return;
  }
  profile_->at_close([name = name_, start = start_, end](StepProfile& profile) {
    float ms = 0.0f;
    const bool timed = cudaEventSynchronize(end) == cudaSuccess && cudaEventElapsedTime(&ms, start, end) == cudaSuccess;
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    if (timed) profile.add(ProfileKind::Kernel, name, static_cast<double>(ms) * 1e-3);
  });
}

}  // namespace lab::cuda
