// CUDA kernels of common/ops/embedding.h, for f32, bf16 and f16 activations (out, dout) with fp32 arithmetic
// (dtype_dispatch.cuh); the tables and their gradients are f32 whatever the activations are.
//
// Forward: one thread per output element (b, t, c); consecutive threads take consecutive channels, so
// the reads of a wte row, a wpe row and the write of an out row are all coalesced.
//
// Backward: one thread per (t, c). It walks the batch, summing dout[b, t, c] into a register for dwpe
// (a fixed order: deterministic) and adding each dout[b, t, c] into dwte[token, c] with atomicAdd. Atomics
// are what make repeated tokens correct: two positions holding the same token add into the same row of
// dwte, possibly at the same time. The price is that the order of those additions, and so the last bits
// of dwte, may change from run to run; chapter 6 shows a deterministic (sorted) alternative.
//
// Token ids are not validated here (that would cost a host synchronisation per call): an id outside
// [0, Vp) produces a NaN row in the forward, so the loss shows it at once, and is skipped in the
// backward; nothing is ever read or written out of bounds. The CPU backend rejects such ids.
#include <math_constants.h>

#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/embedding.h"

namespace lab::ops::cuda {

namespace {

// ---------------------------------------------------------------- kernels

// out = wte[token] + wpe[t], summed in f32 and rounded once to D.
template <typename D>
__global__ void embedding_forward_kernel(D* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t BT,
                                         int64_t T, int64_t C, int64_t V) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= BT * C) return;
  const int64_t bt = i / C, c = i % C, t = bt % T;
  const int64_t token = tokens[bt];
  out[i] = store_as<D>((token >= 0 && token < V) ? wte[token * C + c] + wpe[t * C + c] : CUDART_NAN_F);
}

// dwte holds rows [first_row, first_row + rows) of the vocabulary (null: not computed), dwpe may be null too; each
// dout element is widened to f32 (exact) before it is added. `add_dwpe` false: the position sums are stored into
// dwpe, which is not read.
template <typename D>
__global__ void embedding_backward_kernel(float* dwte, float* dwpe, bool add_dwpe, const D* dout, const int32_t* tokens,
                                          int64_t B, int64_t T, int64_t C, int64_t rows, int64_t first_row) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * C) return;
  const int64_t t = i / C, c = i % C;
  float position_sum = 0.0f;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t bt = b * T + t;
    const float g = load(dout[bt * C + c]);
    position_sum += g;
    const int64_t row = tokens[bt] - first_row;
    if (dwte && row >= 0 && row < rows) atomicAdd(&dwte[row * C + c], g);
  }
  if (dwpe) dwpe[t * C + c] = add_dwpe ? dwpe[t * C + c] + position_sum : position_sum;
}

// The backward into rows [first_row, first_row + dwte_rows.dim(0)) of dwte, for dout of storage type S (float,
// Bf16, F16).
template <typename S>
void launch_backward(const Tensor& dwte_rows, const Tensor& dwpe, GradWrite dwpe_write, const Tensor& dout,
                     const Tensor& tokens, int64_t first_row) {
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = dout.dim(2);
  if (B * T * C == 0) return;
  LaunchScope scope(dout);
  LAB_LAUNCH(embedding_backward_kernel<typename DeviceType<S>::type>,
             {grid_for(T * C, kBlockSize), kBlockSize, 0, scope.stream()},
             dwte_rows.defined() ? dwte_rows.data<float>() : nullptr, dwpe.defined() ? dwpe.data<float>() : nullptr,
             dwpe_write == GradWrite::Add, device_data<S>(dout), tokens.data<int32_t>(), B, T, C,
             dwte_rows.defined() ? dwte_rows.dim(0) : 0, first_row);
}

}  // namespace

// ---------------------------------------------------------------- launchers

void embedding_forward(const Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  const int64_t B = tokens.dim(0), T = tokens.dim(1), C = wte.dim(1), V = wte.dim(0);
  if (B * T * C == 0) return;
  LaunchScope scope(out);
  dispatch_float_dtype(out.dtype(), "embedding_forward", [&](auto tag) {
    using S = typename decltype(tag)::type;
    LAB_LAUNCH(embedding_forward_kernel<typename DeviceType<S>::type>,
               {grid_for(B * T * C, kBlockSize), kBlockSize, 0, scope.stream()}, device_data<S>(out),
               tokens.data<int32_t>(), wte.data<float>(), wpe.data<float>(), B * T, T, C, V);
  });
}

void embedding_backward(const Tensor& dwte, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                        GradWrite dwpe_write) {
  dispatch_float_dtype(dout.dtype(), "embedding_backward", [&](auto tag) {
    launch_backward<typename decltype(tag)::type>(dwte, dwpe, dwpe_write, dout, tokens, 0);
  });
}

void embedding_backward_rows(const Tensor& dwte_rows, const Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                             int64_t first_row) {
  launch_backward<float>(dwte_rows, dwpe, GradWrite::Add, dout, tokens, first_row);
}

}  // namespace lab::ops::cuda
