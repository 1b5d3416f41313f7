// CUDA kernels of common/ops/reduce.h: sum of squares and sum, ending on the host in double.
//
// Parallelisation: a fixed grid of at most kMaxBlocks blocks strides over the tensor; each thread sums
// its elements in float, each block reduces its threads in float and writes one partial sum, and the
// host adds the partial sums in double, in block order. The grid does not depend on the GPU model, so
// the result is the same number on every GPU (and run to run).
#include <algorithm>
#include <vector>

#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/reduce.h"

namespace lab::ops::cuda {

namespace {

constexpr int64_t kMaxBlocks = 1024;

// ---------------------------------------------------------------- kernel

template <bool kSquare>
__global__ void partial_sums_kernel(float* partials, const float* x, int64_t n) {
  __shared__ float scratch[kWarpSize];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    acc += kSquare ? v * v : v;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// ---------------------------------------------------------------- launcher

template <bool kSquare>
double reduce_to_host(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  const int64_t blocks = std::min(ceil_div(n, kBlockSize), kMaxBlocks);
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({blocks}, DType::F32, x.device());
  {
    LaunchScope scope(x);
    LAB_LAUNCH((partial_sums_kernel<kSquare>), {static_cast<unsigned int>(blocks), kBlockSize, 0, scope.stream()},
               partials.data<float>(), x.data<float>(), n);
  }
  // A synchronous copy on the same (current) stream: it waits for the kernel.
  double total = 0.0;
  for (const float p : partials.to_floats()) total += p;
  return total;
}

}  // namespace

double sum_squares(const Tensor& x) {
  return reduce_to_host<true>(x);
}
double sum(const Tensor& x) {
  return reduce_to_host<false>(x);
}

}  // namespace lab::ops::cuda
