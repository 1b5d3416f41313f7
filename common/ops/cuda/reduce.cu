// CUDA kernels of common/ops/reduce.h: sum of squares and sum, ending on the host in double, or on the device.
//
// Parallelisation: a fixed grid of at most kMaxBlocks blocks strides over the tensor; each thread sums
// its elements in float, each block reduces its threads in float and writes one partial sum, and the
// host (or, for the results that stay on the device, one thread of a second kernel) adds the partial sums in
// double, in block order. The grid does not depend on the GPU model, so
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

// The partial sums added in double in block order, as the host adds them in reduce_to_host: one thread, since
// the order is the point (at most kMaxBlocks additions).
__device__ double sum_in_order(const float* partials, int64_t blocks) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partials[b];
  return total;
}

__global__ void accumulate_sum_kernel(float* total, const float* partials, int64_t blocks, double weight) {
  *total = static_cast<float>(static_cast<double>(*total) + weight * sum_in_order(partials, blocks));
}

// out[0] = the norm, out[1] = the update's gradient scale (reduce.h's clip_scale, in the same double arithmetic).
// The loss scale is loss_scale_value, times *loss_scale_on_device when given (in f32, as GradScale::read()).
__global__ void norm_and_scale_kernel(float* out, const float* partials, int64_t blocks, double max_norm,
                                      float loss_scale_value, const float* loss_scale_on_device) {
  const double loss_scale =
      loss_scale_on_device ? loss_scale_value * *loss_scale_on_device : static_cast<double>(loss_scale_value);
  const double norm = sqrt(sum_in_order(partials, blocks)) / loss_scale;
  out[0] = static_cast<float>(norm);
  double coefficient = 1.0;
  if (max_norm > 0.0) {
    const double q = max_norm / (norm + 1e-6);
    coefficient = static_cast<float>(q < 1.0 ? q : 1.0);
  }
  out[1] = static_cast<float>(coefficient / loss_scale);
}

// ---------------------------------------------------------------- launchers

// The partial sums of x (of its squares with kSquare), one per block, in a workspace tensor.
template <bool kSquare>
Tensor partial_sums(const Tensor& x) {
  const int64_t n = x.numel();
  const int64_t blocks = std::max<int64_t>(1, std::min(ceil_div(n, kBlockSize), kMaxBlocks));
  MemoryScope workspace(MemCategory::Workspace);
  if (n == 0) return Tensor::zeros({1}, DType::F32, x.device());
  const Tensor partials = Tensor::empty({blocks}, DType::F32, x.device());  // every block writes its own
  LaunchScope scope(x);
  LAB_LAUNCH((partial_sums_kernel<kSquare>), {static_cast<unsigned int>(blocks), kBlockSize, 0, scope.stream()},
             partials.data<float>(), x.data<float>(), n);
  return partials;
}

template <bool kSquare>
double reduce_to_host(const Tensor& x) {
  if (x.numel() == 0) return 0.0;
  // A synchronous copy on the same (current) stream: it waits for the kernel.
  double total = 0.0;
  for (const float p : partial_sums<kSquare>(x).to_floats()) total += p;
  return total;
}

}  // namespace

double sum_squares(const Tensor& x) {
  return reduce_to_host<true>(x);
}
double sum(const Tensor& x) {
  return reduce_to_host<false>(x);
}

void accumulate_sum(const Tensor& total, const Tensor& x, double weight) {
  const Tensor partials = partial_sums<false>(x);
  LaunchScope scope(x);
  LAB_LAUNCH(accumulate_sum_kernel, {1, 1, 0, scope.stream()}, total.data<float>(), partials.data<float>(),
             partials.numel(), weight);
}

void gradient_norm_and_scale(const Tensor& out, const Tensor& grads, double max_norm, const GradScale& loss_scale) {
  const Tensor partials = partial_sums<true>(grads);
  LaunchScope scope(grads);
  LAB_LAUNCH(norm_and_scale_kernel, {1, 1, 0, scope.stream()}, out.data<float>(), partials.data<float>(),
             partials.numel(), max_norm, loss_scale.value, loss_scale.device_pointer());
}

void accumulate_sum_squares(const Tensor& total, const Tensor& x) {
  const Tensor partials = partial_sums<true>(x);
  LaunchScope scope(x);
  LAB_LAUNCH(accumulate_sum_kernel, {1, 1, 0, scope.stream()}, total.data<float>(), partials.data<float>(),
             partials.numel(), 1.0);
}

// The sum of squares is one "partial sum" for the kernel above: the norm is sqrt(double(sum_squares[0])).
void norm_and_scale(const Tensor& out, const Tensor& sum_squares, double max_norm, const GradScale& loss_scale) {
  LaunchScope scope(out);
  LAB_LAUNCH(norm_and_scale_kernel, {1, 1, 0, scope.stream()}, out.data<float>(), sum_squares.data<float>(), int64_t{1},
             max_norm, loss_scale.value, loss_scale.device_pointer());
}

}  // namespace lab::ops::cuda
