// A kernel that faults on purpose (see faulty_kernel.h).
#include <cuda_runtime.h>

#include "common/cuda/check.h"
#include "common/ops/cuda/launch.cuh"
#include "tests/common/cuda/faulty_kernel.h"

namespace lab::test {

namespace {

constexpr int kThreads = 64;
// Work each thread does before the fault (a few milliseconds in the emulator), so that the kernel is still
// running when its launch is checked, as a real kernel usually is.
constexpr int kWarmUpSteps = 100000;

__global__ void barrier_misuse_kernel(float* out, int steps) {
  float x = 1.0f;
  for (int i = 0; i < steps; ++i) x = x * 0.999f + 0.001f;
  out[threadIdx.x] = x;
  if (threadIdx.x % 2 == 0) return;  // the even threads leave...
  __syncthreads();                   // ...so the odd ones wait at a barrier that cannot complete
  out[threadIdx.x] = 2.0f * x;
}

}  // namespace

void launch_barrier_misuse(const Tensor& out) {
  LAB_CHECK(out.numel() >= kThreads, InvalidArgument, "launch_barrier_misuse needs ", kThreads, " floats");
  ops::cuda::LaunchScope scope(out);
  LAB_LAUNCH(barrier_misuse_kernel, {1, kThreads, 0, scope.stream()}, out.data<float>(), kWarmUpSteps);
}

void load_barrier_misuse() {
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(barrier_misuse_kernel),
                                  cudaFuncAttributePreferredSharedMemoryCarveout, -1));
}

}  // namespace lab::test
