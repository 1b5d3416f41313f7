// Bias + GELU on the GPU, version by version (see bias_gelu_versions.h for what each computes). GPT-2's MLP
// applies it to the first Linear's output: N = B*T rows of OC = 4C = 3072 columns at d12, 100 MB at B*T = 8192.
// Two flops per byte at most: every version is bound by memory, and what separates them is the bytes they move.
//
//   v1  separate kernels. The bias kernel reads x and writes pre, the GELU kernel (the core's) reads pre and
//       writes out: 16 bytes per element where 8 would do. Backward: GELU's backward reads pre and dout and
//       writes dx; dbias then re-reads all of dx (common/ops/cuda/column_sums.cuh): 16 bytes per element.
//   v2  one fused pass. Each thread holds one float4 of columns (and its four biases) and walks rows, so every
//       load is 128-bit and the bias is read once per thread: 8 bytes per element forward (read x, write out).
//       Backward: the same layout, with each thread adding its columns' dx into registers over a chunk of rows:
//       dx is written once and never read back (12 bytes per element: x, dout, dx), and the chunks' partial
//       sums are added by a small kernel (ch06_single_gpu/chunk_totals.cuh): deterministic, no atomics.
//   v3  the GEMM epilogue: ch06::matmul_bias_gelu (the matmul lab's promoted op, cuBLASLt GELU_AUX_BIAS).
//
// v2 takes 4-wide vectors when OC is a multiple of 4 and the tensors are 16-byte aligned, single floats
// otherwise (the same kernel, instantiated for both widths).
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "ch06_single_gpu/chunk_totals.cuh"
#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_versions.h"
#include "ch06_single_gpu/kernels/03_bias_gelu/gelu_tanh.h"
#include "common/core/memory.h"
#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/gelu.h"

namespace lab::ch06::bias_gelu {

namespace {

using gelu_tanh::kCubic;
using gelu_tanh::kSqrt2OverPi;
using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::LaunchScope;

// The core's formulas (common/ops/gelu.h): gelu(v) = v * sigmoid(2u), written v / (1 + exp(-2u)), and
// gelu'(v) = s + 2 v s (1 - s) u',  s = sigmoid(2u),  u = sqrt(2/pi) (v + 0.044715 v^3).
__device__ inline float gelu_exp(float v) {
  return expf(-2.0f * kSqrt2OverPi * (v + kCubic * v * v * v));
}
__device__ inline float gelu_value(float v) {
  return v / (1.0f + gelu_exp(v));
}
__device__ inline float gelu_slope(float v) {
  const float s = 1.0f / (1.0f + gelu_exp(v));
  return s + 2.0f * v * s * (1.0f - s) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
}

// ================================================================ v1: separate kernels

__global__ void add_bias_v1_kernel(float* pre, const float* x, const float* bias, int64_t N, int64_t OC) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * OC) return;
  pre[i] = x[i] + bias[i % OC];
}

__global__ void gelu_backward_v1_kernel(float* dx, const float* pre, const float* dout, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  dx[i] = gelu_slope(pre[i]) * dout[i];
}

// The summands of dbias[c] += sum_n dx[n, c], for the core's column sums.
struct BiasTerms {
  const float* dx;
  int64_t OC;
  __device__ void add(int64_t n, int64_t c, float (&part)[1]) const { part[0] += dx[n * OC + c]; }
};

// ================================================================ v2: one fused pass, float4

// kVec consecutive floats: one 128-bit access for kVec = 4.
template <int kVec>
struct Vec {
  float v[kVec];
  __device__ static Vec load(const float* p) {
    Vec r;
    if constexpr (kVec == 4) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      r.v[0] = q.x;
      r.v[1] = q.y;
      r.v[2] = q.z;
      r.v[3] = q.w;
    } else {
      r.v[0] = *p;
    }
    return r;
  }
  __device__ void store(float* p) const {
    if constexpr (kVec == 4)
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    else
      *p = v[0];
  }
};

// Thread (x, blockIdx.x) holds columns [c, c + kVec), c = kVec (blockIdx.x blockDim.x + x), and walks the rows
// blockIdx.y, blockIdx.y + gridDim.y, ... (grid y is capped at 65535, GPUs' limit).
template <int kVec>
__global__ void __launch_bounds__(kBlockSize)
    bias_gelu_forward_v2_kernel(float* out, const float* x, const float* bias, int64_t N, int64_t OC) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c >= OC) return;
  const Vec<kVec> b = Vec<kVec>::load(bias + c);
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    Vec<kVec> h = Vec<kVec>::load(x + n * OC + c);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float v = h.v[j] + b.v[j];
      h.v[j] = gelu_value(v);
    }
    h.store(out + n * OC + c);
  }
}

// Block (blockIdx.x, chunk blockIdx.y) takes the rows [chunk * rows_per_chunk, ...) of its columns; each thread
// adds its columns' dx over those rows into registers and writes one partial sum per column:
// partials[chunk][c].
template <int kVec>
__global__ void __launch_bounds__(kBlockSize)
    bias_gelu_backward_v2_kernel(float* dx, float* partials, const float* dout, const float* x, const float* bias,
                                 int64_t N, int64_t OC, int64_t rows_per_chunk) {
  const int64_t c = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (c >= OC) return;
  const Vec<kVec> b = Vec<kVec>::load(bias + c);
  Vec<kVec> sum{};
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  for (int64_t n = begin; n < end; ++n) {
    Vec<kVec> g = Vec<kVec>::load(dout + n * OC + c);
    const Vec<kVec> h = Vec<kVec>::load(x + n * OC + c);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      g.v[j] *= gelu_slope(h.v[j] + b.v[j]);
      sum.v[j] += g.v[j];
    }
    g.store(dx + n * OC + c);
  }
  sum.store(partials + static_cast<int64_t>(blockIdx.y) * OC + c);
}

// About one wave of 256-thread blocks on an H100 (132 SMs x 8 resident blocks): enough warps in flight to
// cover memory latency, few enough chunks that their partial sums stay a few percent of the traffic. A
// constant, not the GPU's SM count, so that the order of dbias's additions does not depend on the GPU.
constexpr int64_t kBiasGradBlocks = 1056;

// Whether the tensors can take 4-wide vectors: OC a multiple of 4 and 16-byte aligned data.
bool takes_float4(int64_t OC, std::initializer_list<const Tensor*> tensors) {
  if (OC % 4 != 0) return false;
  for (const Tensor* t : tensors)
    if (reinterpret_cast<uintptr_t>(t->raw()) % 16 != 0) return false;
  return true;
}

// The grid of the v2 kernels: x over column vectors, y over rows (capped) or chunks of rows.
dim3 vector_grid(int64_t OC, int vec, int64_t y) {
  return dim3(grid_for(ops::cuda::ceil_div(OC, vec), kBlockSize), static_cast<unsigned int>(y));
}

template <int kVec>
void launch_forward_v2(const Tensor& out, const Tensor& x, const Tensor& bias, int64_t N, int64_t OC,
                       cudaStream_t stream) {
  LAB_LAUNCH((bias_gelu_forward_v2_kernel<kVec>),
             {vector_grid(OC, kVec, std::min<int64_t>(N, 65535)), kBlockSize, 0, stream}, out.data<float>(),
             x.data<float>(), bias.data<float>(), N, OC);
}

template <int kVec>
void launch_backward_v2(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& bias,
                        int64_t N, int64_t OC, cudaStream_t stream) {
  const int64_t column_blocks = grid_for(ops::cuda::ceil_div(OC, kVec), kBlockSize);
  const int64_t wanted =
      std::clamp<int64_t>(ops::cuda::ceil_div(kBiasGradBlocks, column_blocks), 1, std::min<int64_t>(N, 65535));
  const int64_t rows_per_chunk = ops::cuda::ceil_div(N, wanted);
  const int64_t chunks = ops::cuda::ceil_div(N, rows_per_chunk);  // none empty
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({chunks, OC}, DType::F32, dx.device());
  LAB_LAUNCH((bias_gelu_backward_v2_kernel<kVec>), {vector_grid(OC, kVec, chunks), kBlockSize, 0, stream},
             dx.data<float>(), partials.data<float>(), dout.data<float>(), x.data<float>(), bias.data<float>(), N, OC,
             rows_per_chunk);
  cuda::add_chunk_totals<1>({{dbias.data<float>()}}, partials.data<float>(), chunks, OC, stream);
}

}  // namespace

// ================================================================ launchers

void forward_v1(const Tensor& out, const Tensor& pre, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel();
  if (OC == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / OC;
  LaunchScope scope(x);
  LAB_LAUNCH(add_bias_v1_kernel, {grid_for(N * OC, kBlockSize), kBlockSize, 0, scope.stream()}, pre.data<float>(),
             x.data<float>(), bias.data<float>(), N, OC);
  ops::cuda::gelu_forward(out, pre);
}

void backward_v1(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& pre) {
  const int64_t OC = dbias.numel();
  if (OC == 0 || pre.numel() == 0) return;
  const int64_t N = pre.numel() / OC;
  LaunchScope scope(pre);
  LAB_LAUNCH(gelu_backward_v1_kernel, {grid_for(N * OC, kBlockSize), kBlockSize, 0, scope.stream()}, dx.data<float>(),
             pre.data<float>(), dout.data<float>(), N * OC);
  ops::cuda::add_column_sums<1>({{dbias.data<float>()}}, BiasTerms{dx.data<float>(), OC}, N, OC, dx.device(),
                                scope.stream());
}

void forward_v2(const Tensor& out, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel();
  if (OC == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / OC;
  LaunchScope scope(x);
  if (takes_float4(OC, {&out, &x, &bias}))
    launch_forward_v2<4>(out, x, bias, N, OC, scope.stream());
  else
    launch_forward_v2<1>(out, x, bias, N, OC, scope.stream());
}

void backward_v2(const Tensor& dx, const Tensor& dbias, const Tensor& dout, const Tensor& x, const Tensor& bias) {
  const int64_t OC = bias.numel();
  if (OC == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / OC;
  LaunchScope scope(x);
  if (takes_float4(OC, {&dx, &dout, &x, &bias}))
    launch_backward_v2<4>(dx, dbias, dout, x, bias, N, OC, scope.stream());
  else
    launch_backward_v2<1>(dx, dbias, dout, x, bias, N, OC, scope.stream());
}

}  // namespace lab::ch06::bias_gelu
