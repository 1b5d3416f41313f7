// CUDA kernels of common/ops/gelu.h (tanh approximation in its sigmoid form), for f32, bf16 and f16 storage with
// fp32 arithmetic (dtype_dispatch.cuh).
//
// Parallelisation: one thread per element, kBlockSize threads a block; consecutive threads read and
// write consecutive elements, so every access is coalesced. Forward and backward are one launch each.
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/gelu.h"

namespace lab::ops::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// ---------------------------------------------------------------- kernels

template <typename D>
__global__ void gelu_forward_kernel(D* out, const D* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = load(x[i]);
  out[i] = store_as<D>(v / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v))));  // v sigmoid(2u)
}

template <typename D>
__global__ void gelu_backward_kernel(D* dx, const D* x, const D* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = load(x[i]);
  // d/dv [v s(2u)] = s + 2 v s (1 - s) u',  s = sigmoid(2u) = 0.5 (1 + tanh u)
  const float s = 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
  const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  dx[i] = store_as<D>(load(dx[i]) + grad * load(dout[i]));
}

}  // namespace

// ---------------------------------------------------------------- launchers

void gelu_forward(const Tensor& out, const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return;
  LaunchScope scope(x);
  dispatch_float_dtype(x.dtype(), "gelu_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    LAB_LAUNCH(gelu_forward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<T>(out),
               device_data<T>(x), n);
  });
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout) {
  const int64_t n = x.numel();
  if (n == 0) return;
  LaunchScope scope(x);
  dispatch_float_dtype(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    LAB_LAUNCH(gelu_backward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<T>(dx),
               device_data<T>(x), device_data<T>(dout), n);
  });
}

}  // namespace lab::ops::cuda
