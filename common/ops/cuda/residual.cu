// CUDA kernels of common/ops/residual.h, for f32, bf16 and f16 storage with fp32 arithmetic
// (dtype_dispatch.cuh).
//
// Parallelisation: one thread per 16-byte piece (8 elements in 16 bits, 4 in f32: dtype_dispatch.cuh's Piece) when
// the tensors split into pieces, as GPT-2's do, else one thread per element; kBlockSize threads a block, coalesced.
// The kernels only move memory, and threads that load 2 bytes each keep too few bytes in flight to reach the
// GPU's bandwidth (the profile of a B = 32 GPT-2 step on an H200 put the element-at-a-time kernels at about
// 2 TB/s). The backward is one launch for both gradients; a gradient that is not wanted arrives as a null pointer.
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

// The same two kernels a 16-byte piece at a time: `pieces` pieces of every tensor.
template <typename D>
__global__ void residual_forward_pieces_kernel(D* out, const D* a, const D* b, int64_t pieces) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pieces) return;
  const Piece<D> av = reinterpret_cast<const Piece<D>*>(a)[i], bv = reinterpret_cast<const Piece<D>*>(b)[i];
  Piece<D> sum;
#pragma unroll
  for (int e = 0; e < Piece<D>::kElements; ++e) sum.e[e] = store_as<D>(load(av.e[e]) + load(bv.e[e]));
  reinterpret_cast<Piece<D>*>(out)[i] = sum;
}

template <typename D>
__device__ void add_piece(D* grad, int64_t i, const Piece<D>& g) {
  Piece<D> v = reinterpret_cast<const Piece<D>*>(grad)[i];
#pragma unroll
  for (int e = 0; e < Piece<D>::kElements; ++e) v.e[e] = store_as<D>(load(v.e[e]) + load(g.e[e]));
  reinterpret_cast<Piece<D>*>(grad)[i] = v;
}

template <typename D>
__global__ void residual_backward_pieces_kernel(D* da, D* db, const D* dout, int64_t pieces) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pieces) return;
  const Piece<D> g = reinterpret_cast<const Piece<D>*>(dout)[i];  // before either write, as above
  if (da) add_piece(da, i, g);
  if (db) add_piece(db, i, g);
}

// dx = dout, a 16-byte piece or an element a thread, as above.
template <typename D>
__global__ void gradient_copy_pieces_kernel(D* dx, const D* dout, int64_t pieces) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < pieces) reinterpret_cast<Piece<D>*>(dx)[i] = reinterpret_cast<const Piece<D>*>(dout)[i];
}
template <typename D>
__global__ void gradient_copy_kernel(D* dx, const D* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = dout[i];
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
    if (const int64_t pieces = pieces_of<D>(n, device_data<T>(out), device_data<T>(a), device_data<T>(b)); pieces > 0)
      LAB_LAUNCH(residual_forward_pieces_kernel<D>, {grid_for(pieces, kBlockSize), kBlockSize, 0, scope.stream()},
                 device_data<T>(out), device_data<T>(a), device_data<T>(b), pieces);
    else
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
    D* const da_data = device_data_or_null<T>(da);
    D* const db_data = device_data_or_null<T>(db);
    const D* const dout_data = device_data<T>(dout);
    if (const int64_t pieces = pieces_of<D>(n, da_data, db_data, dout_data); pieces > 0)  // null is aligned
      LAB_LAUNCH(residual_backward_pieces_kernel<D>, {grid_for(pieces, kBlockSize), kBlockSize, 0, scope.stream()},
                 da_data, db_data, dout_data, pieces);
    else
      LAB_LAUNCH(residual_backward_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, da_data,
                 db_data, dout_data, n);
  });
}

void residual_gradient_copy(const Tensor& dx, const Tensor& dout) {
  const int64_t n = dout.numel();
  if (n == 0) return;
  LaunchScope scope(dout);
  dispatch_float_dtype(dout.dtype(), "residual_gradient_copy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    if (const int64_t pieces = pieces_of<D>(n, device_data<T>(dx), device_data<T>(dout)); pieces > 0)
      LAB_LAUNCH(gradient_copy_pieces_kernel<D>, {grid_for(pieces, kBlockSize), kBlockSize, 0, scope.stream()},
                 device_data<T>(dx), device_data<T>(dout), pieces);
    else
      LAB_LAUNCH(gradient_copy_kernel<D>, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<T>(dx),
                 device_data<T>(dout), n);
  });
}

}  // namespace lab::ops::cuda
