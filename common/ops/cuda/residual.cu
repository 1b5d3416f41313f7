// CUDA kernels of common/ops/residual.h, for f32, bf16 and f16 storage with fp32 arithmetic
// (dtype_dispatch.cuh).
//
// Parallelisation: one thread per element, kBlockSize threads a block, coalesced. The backward is one
// launch for both gradients; a gradient that is not wanted arrives as a null pointer.
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/residual.h"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

template <typename D>
__global__ void residual_forward_kernel(D* out, const D* a, const D* b, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = store_as<D>(load(a[i]) + load(b[i]));
}

template <typename D>
__global__ void residual_backward_kernel(D* da, D* db, const D* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // Read the gradient once, before either write: da or db may be the very buffer dout lives in.
  const float g = load(dout[i]);
  if (da) da[i] = store_as<D>(load(da[i]) + g);
  if (db) db[i] = store_as<D>(load(db[i]) + g);
}

}  // namespace

// ---------------------------------------------------------------- launchers

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchScope scope(out);
  dispatch_float_dtype(out.dtype(), "residual_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    LAB_LAUNCH(residual_forward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()},
               device_data<T>(out), device_data<T>(a), device_data<T>(b), n);
  });
}

void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const int64_t n = dout.numel();
  if (n == 0 || (!da.defined() && !db.defined())) return;
  LaunchScope scope(dout);
  dispatch_float_dtype(dout.dtype(), "residual_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    LAB_LAUNCH(residual_backward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()},
               da.defined() ? device_data<T>(da) : nullptr, db.defined() ? device_data<T>(db) : nullptr,
               device_data<T>(dout), n);
  });
}

}  // namespace lab::ops::cuda
