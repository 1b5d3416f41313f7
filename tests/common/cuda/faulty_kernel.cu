// A kernel that faults on purpose (see faulty_kernel.h).
#include "common/ops/cuda/launch.cuh"
#include "tests/common/cuda/faulty_kernel.h"

namespace lab::test {

namespace {

constexpr int kThreads = 64;

__global__ void barrier_misuse_kernel(float* out) {
  if (threadIdx.x % 2 == 0) return;  // the even threads leave...
  __syncthreads();                   // ...so the odd ones wait at a barrier that cannot complete
  out[threadIdx.x] = 1.0f;
}

}  // namespace

void launch_barrier_misuse(const Tensor& out) {
  LAB_CHECK(out.numel() >= kThreads, InvalidArgument, "launch_barrier_misuse needs ", kThreads, " floats");
  ops::cuda::LaunchScope scope(out);
  LAB_LAUNCH(barrier_misuse_kernel, {1, kThreads, 0, scope.stream()}, out.data<float>());
}

}  // namespace lab::test
