// LayerNorm forward and backward on the GPU, version by version (GPT-2: eps 1e-5, C = 768 at d12, N = B*T rows).
// Every version computes what common/ops/layernorm.h specifies and is checked against its CPU reference.
//
//   v1  one thread per row. The CPU loop moved to the GPU as it is: each thread walks its row three times
//       (mean, variance, output). Neighbouring threads read addresses C floats apart, so a warp's load touches
//       32 different cache lines and uses 4 bytes of each; and N rows are only N threads (8192 at B*T = 8192:
//       a few warps per SM). Backward: dx likewise, and dweight/dbias by one thread per column walking all N
//       rows: C threads (768) for the whole GPU.
//   v2  one warp per row: the core's kernels (common/ops/cuda/layernorm.cu), timed here as they are. The 32
//       lanes stride over the row, so each load instruction reads 128 contiguous bytes, and warp shuffles
//       combine the lanes' sums without shared memory. Backward: the dx kernel, then dweight/dbias as column
//       sums over enough blocks to fill the GPU (two more kernels that read dout and x again).
//   v3  (this file) the row in registers, 128-bit loads and stores (row_in_registers.cuh): each lane loads its
//       float4 vectors once and keeps them for the mean, the variance and the output, so memory sees each
//       element once, in a quarter of the load instructions; the two-pass variance stays. Backward
//       (layernorm_weight_grads.cuh): dweight and dbias summed inside the dx kernel, one partial sum per block,
//       then a small kernel adding them: dout and x are read once instead of twice.
//   v4  v3 fused with the residual add before it (fused_residual_layernorm.cu, promoted into lab_ch06).
//
// v3 needs C a multiple of 4, at most 1664, and 16-byte aligned rows; other shapes are refused with an error.
#include "ch06_single_gpu/chunk_totals.cuh"
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_versions.h"
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_weight_grads.cuh"
#include "ch06_single_gpu/kernels/02_layernorm/row_in_registers.cuh"
#include "common/core/memory.h"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/layernorm.h"

namespace lab::ch06::layernorm_lab {

namespace {

using namespace ch06::cuda;  // RegisterRow and the backward's parts
using ops::kLayerNormEps;
using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::kWarpSize;
using ops::cuda::LaunchScope;

// ================================================================ v1: one thread per row

__global__ void layernorm_forward_v1_kernel(float* out, float* mean, float* rstd, const float* x, const float* w,
                                            const float* b, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= N) return;
  const float* xr = x + row * C;
  float sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) sum += xr[c];
  const float m = sum / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = 0; c < C; ++c) sq += (xr[c] - m) * (xr[c] - m);
  const float s = 1.0f / sqrtf(sq / static_cast<float>(C) + kLayerNormEps);
  float* outr = out + row * C;
  for (int64_t c = 0; c < C; ++c) outr[c] = (xr[c] - m) * s * w[c] + b[c];
  mean[row] = m;
  rstd[row] = s;
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w
__global__ void layernorm_backward_dx_v1_kernel(float* dx, const float* dout, const float* x, const float* w,
                                                const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= N) return;
  const float* xr = x + row * C;
  const float* dr = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t c = 0; c < C; ++c) {
    const float g = dr[c] * w[c];
    g_sum += g;
    gx_sum += g * (xr[c] - m) * s;
  }
  const float g_mean = g_sum / static_cast<float>(C), gx_mean = gx_sum / static_cast<float>(C);
  float* dxr = dx + row * C;
  for (int64_t c = 0; c < C; ++c) dxr[c] += s * (dr[c] * w[c] - g_mean - (xr[c] - m) * s * gx_mean);
}

// dw[c] += sum_n dout[n, c] * xhat[n, c],  db[c] += sum_n dout[n, c]: one thread per column, all N rows.
__global__ void layernorm_weight_grads_v1_kernel(float* dw, float* db, const float* dout, const float* x,
                                                 const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw_sum = 0.0f, db_sum = 0.0f;
  for (int64_t n = 0; n < N; ++n) {
    const float d = dout[n * C + c];
    dw_sum += d * (x[n * C + c] - mean[n]) * rstd[n];
    db_sum += d;
  }
  dw[c] += dw_sum;
  db[c] += db_sum;
}

// ================================================================ v3: the row in registers, float4

constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

template <int kChunks>
__global__ void __launch_bounds__(kBlockSize)
    layernorm_forward_v3_kernel(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b,
                                int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;  // the whole warp leaves: no collective is left waiting
  RegisterRow<kChunks> xr;
  xr.load(x + row * C, C, lane);
  const RowStatistics s = row_statistics(xr, C, lane, kLayerNormEps);
  normalise_row(xr, s, w, b, C, lane);
  xr.store(out + row * C, C, lane);
  if (lane == 0) {
    mean[row] = s.mean;
    rstd[row] = s.rstd;
  }
}

template <int kChunks>
__global__ void __launch_bounds__(kGradThreads)
    layernorm_backward_v3_kernel(float* dx, float* partials, const float* dout, const float* x, const float* w,
                                 const float* mean, const float* rstd, int64_t N, int64_t C, int64_t rows_per_block) {
  LAB_DYNAMIC_SHARED(float, shared);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  RegisterRow<kChunks> dw_sum, db_sum;
  dw_sum.fill(0.0f);
  db_sum.fill(0.0f);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t end = begin + rows_per_block < N ? begin + rows_per_block : N;
  for (int64_t row = begin + warp; row < end; row += kGradWarps) {
    RegisterRow<kChunks> g, xr;
    g.load(dout + row * C, C, lane);
    xr.load(x + row * C, C, lane);
    row_input_gradient(g, xr, w, mean[row], rstd[row], C, lane, dw_sum, db_sum);
    g.add_into(dx + row * C, C, lane);
  }
  write_block_partials(partials, dw_sum, db_sum, shared, C);  // every thread, after its rows
}

void check_fits_v3(int64_t C, std::initializer_list<const void*> rows) {
  LAB_CHECK(fits_register_row(C, rows), Unsupported, "layernorm v3 holds rows of C = 4k <= ", kMaxRowColumns,
            " columns with 16-byte aligned rows in registers; C = ", C, " (or an unaligned row) is not supported");
}

}  // namespace

// ================================================================ launchers

void forward_v1(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                const Tensor& b) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  LAB_LAUNCH(layernorm_forward_v1_kernel, {grid_for(N, kBlockSize), kBlockSize, 0, scope.stream()}, out.data<float>(),
             mean.data<float>(), rstd.data<float>(), x.data<float>(), w.data<float>(), b.data<float>(), N, C);
}

void backward_v1(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                 const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  LAB_LAUNCH(layernorm_backward_dx_v1_kernel, {grid_for(N, kBlockSize), kBlockSize, 0, scope.stream()},
             dx.data<float>(), dout.data<float>(), x.data<float>(), w.data<float>(), mean.data<float>(),
             rstd.data<float>(), N, C);
  LAB_LAUNCH(layernorm_weight_grads_v1_kernel, {grid_for(C, kBlockSize), kBlockSize, 0, scope.stream()},
             dw.data<float>(), db.data<float>(), dout.data<float>(), x.data<float>(), mean.data<float>(),
             rstd.data<float>(), N, C);
}

void forward_v3(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                const Tensor& b) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  check_fits_v3(C, {out.raw(), x.raw(), w.raw(), b.raw()});
  LaunchScope scope(x);
  launch_for_row_width(C, [&]<int kChunks>() {
    LAB_LAUNCH((layernorm_forward_v3_kernel<kChunks>), {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
               out.data<float>(), mean.data<float>(), rstd.data<float>(), x.data<float>(), w.data<float>(),
               b.data<float>(), N, C);
  });
}

void backward_v3(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                 const Tensor& w, const Tensor& mean, const Tensor& rstd) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  check_fits_v3(C, {dx.raw(), dout.raw(), x.raw(), w.raw()});
  LaunchScope scope(x);
  const WeightGradSplit split = weight_grad_split(N);
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({2, split.blocks, C}, DType::F32, x.device());
  const size_t shared_bytes = 2 * static_cast<size_t>(C) * sizeof(float);
  launch_for_row_width(C, [&]<int kChunks>() {
    LAB_LAUNCH((layernorm_backward_v3_kernel<kChunks>),
               {static_cast<unsigned int>(split.blocks), kGradThreads, shared_bytes, scope.stream()}, dx.data<float>(),
               partials.data<float>(), dout.data<float>(), x.data<float>(), w.data<float>(), mean.data<float>(),
               rstd.data<float>(), N, C, split.rows_per_block);
  });
  add_chunk_totals<2>({{dw.data<float>(), db.data<float>()}}, partials.data<float>(), split.blocks, C, scope.stream());
}

}  // namespace lab::ch06::layernorm_lab
