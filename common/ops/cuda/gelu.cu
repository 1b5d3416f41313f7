// CUDA kernels of common/ops/gelu.h (tanh approximation in its sigmoid form).
//
// Parallelisation: one thread per element, kBlockSize threads a block; consecutive threads read and
// write consecutive elements, so every access is coalesced. Forward and backward are one launch each.
#include "common/ops/cuda/launch.cuh"
#include "common/ops/gelu.h"

namespace lab::ops::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// ---------------------------------------------------------------- kernels

__global__ void gelu_forward_kernel(float* out, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  out[i] = v / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));  // v * sigmoid(2u), see gelu.h
}

__global__ void gelu_backward_kernel(float* dx, const float* x, const float* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  // d/dv [v s(2u)] = s + 2 v s (1 - s) u',  s = sigmoid(2u) = 0.5 (1 + tanh u)
  const float s = 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
  const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  dx[i] += grad * dout[i];
}

}  // namespace

// ---------------------------------------------------------------- launchers

void gelu_forward(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return;
  LaunchScope scope(x);
  LAB_LAUNCH(gelu_forward_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
             x.data<float>(), n);
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  const int64_t n = x.numel();
  if (n == 0) return;
  LaunchScope scope(x);
  LAB_LAUNCH(gelu_backward_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, dx.data<float>(),
             x.data<float>(), dout.data<float>(), n);
}

}  // namespace lab::ops::cuda
