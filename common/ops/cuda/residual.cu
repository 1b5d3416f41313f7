// CUDA kernels of common/ops/residual.h.
//
// Parallelisation: one thread per element, kBlockSize threads a block, coalesced. The backward is one
// launch for both gradients; a gradient that is not wanted arrives as a null pointer.
#include "common/ops/cuda/launch.cuh"
#include "common/ops/residual.h"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

__global__ void residual_forward_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float* da, float* db, const float* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // Read the gradient once, before either write: da or db may be the very buffer dout lives in.
  const float g = dout[i];
  if (da) da[i] += g;
  if (db) db[i] += g;
}

}  // namespace

// ---------------------------------------------------------------- launchers

void residual_forward(const Tensor& out, const Tensor& a, const Tensor& b) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LaunchScope scope(out);
  LAB_LAUNCH(residual_forward_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
             a.data<float>(), b.data<float>(), n);
}

void residual_backward(const Tensor& da, const Tensor& db, const Tensor& dout) {
  const int64_t n = dout.numel();
  if (n == 0 || (!da.defined() && !db.defined())) return;
  LaunchScope scope(dout);
  LAB_LAUNCH(residual_backward_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()},
             da.defined() ? da.data<float>() : nullptr, db.defined() ? db.data<float>() : nullptr, dout.data<float>(),
             n);
}

}  // namespace lab::ops::cuda
