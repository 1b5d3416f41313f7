// CUDA kernels of common/ops/gelu.h (tanh approximation in its sigmoid form), for f32, bf16 and f16 storage with
// fp32 arithmetic (dtype_dispatch.cuh).
//
// Parallelisation: one thread per element, kBlockSize threads a block, or one thread per 16-byte piece where the
// tensors split into them; consecutive threads read and write consecutive elements, so every access is
// coalesced. Forward and backward are one launch each.
#include <cstdint>

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
__global__ void gelu_backward_kernel(D* dx, const D* x, const D* dout, int64_t n, bool add) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = load(x[i]);
  // d/dv [v s(2u)] = s + 2 v s (1 - s) u',  s = sigmoid(2u) = 0.5 (1 + tanh u)
  const float s = 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
  const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
  dx[i] = store_as<D>((add ? load(dx[i]) : 0.0f) + grad * load(dout[i]));  // add false: dx is never read
}

// The same over 16-byte pieces (16 / sizeof(D) elements a thread) when n splits into them and the tensors are
// 16-byte aligned: one 16-byte load or store per tensor where the kernels above make 8 of 2 bytes in 16 bits (on an
// H200 the backward above moved about 1.2 TB/s at GPT-2's 8192 x 3072 in bf16, 123 us a call).
template <typename D>
__global__ void gelu_forward_pieces_kernel(D* out, const D* x, int64_t pieces) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pieces) return;
  const Piece<D> xv = reinterpret_cast<const Piece<D>*>(x)[i];
  Piece<D> ov;
#pragma unroll
  for (int e = 0; e < Piece<D>::kElements; ++e) {
    const float v = load(xv.e[e]);
    ov.e[e] = store_as<D>(v / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v))));
  }
  reinterpret_cast<Piece<D>*>(out)[i] = ov;
}

template <typename D>
__global__ void gelu_backward_pieces_kernel(D* dx, const D* x, const D* dout, int64_t pieces, bool add) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pieces) return;
  const Piece<D> xv = reinterpret_cast<const Piece<D>*>(x)[i], dv = reinterpret_cast<const Piece<D>*>(dout)[i];
  Piece<D> gv;
  if (add) gv = reinterpret_cast<const Piece<D>*>(dx)[i];
#pragma unroll
  for (int e = 0; e < Piece<D>::kElements; ++e) {
    const float v = load(xv.e[e]);
    const float s = 1.0f / (1.0f + expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v)));
    const float grad = s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    gv.e[e] = store_as<D>((add ? load(gv.e[e]) : 0.0f) + grad * load(dv.e[e]));
  }
  reinterpret_cast<Piece<D>*>(dx)[i] = gv;
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
    if (const int64_t pieces = pieces_of<D>(n, device_data<T>(out), device_data<T>(x)); pieces > 0)
      LAB_LAUNCH(gelu_forward_pieces_kernel<D>, {grid_for(pieces, kBlockSize), kBlockSize, 0, scope.stream()},
                 device_data<T>(out), device_data<T>(x), pieces);
    else
      LAB_LAUNCH(gelu_forward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<T>(out),
                 device_data<T>(x), n);
  });
}

void gelu_backward(const Tensor& dx, const Tensor& x, const Tensor& dout, GradWrite dx_write) {
  const int64_t n = x.numel();
  if (n == 0) return;
  LaunchScope scope(x);
  const bool add = dx_write == GradWrite::Add;
  dispatch_float_dtype(x.dtype(), "gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    if (const int64_t pieces = pieces_of<D>(n, device_data<T>(dx), device_data<T>(x), device_data<T>(dout)); pieces > 0)
      LAB_LAUNCH(gelu_backward_pieces_kernel<D>, {grid_for(pieces, kBlockSize), kBlockSize, 0, scope.stream()},
                 device_data<T>(dx), device_data<T>(x), device_data<T>(dout), pieces, add);
    else
      LAB_LAUNCH(gelu_backward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<T>(dx),
                 device_data<T>(x), device_data<T>(dout), n, add);
  });
}

}  // namespace lab::ops::cuda
