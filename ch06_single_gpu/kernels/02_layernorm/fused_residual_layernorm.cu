// CUDA kernels of ch06_single_gpu/fused_residual_layernorm.h: version 4 of the LayerNorm lab, promoted into
// lab_ch06.
//
// Forward: LayerNorm v3 (layernorm.cu: one warp per row, the row in registers, 128-bit loads and stores) with
// the residual add in front. The warp loads its rows of a and b, adds them, writes residual and normalises the
// sum it still holds, so residual is written once and never read back: 16 bytes per element (read a and b,
// write residual and out) instead of the 24 of a residual kernel followed by a LayerNorm kernel.
//
// Backward: LayerNorm v3's backward (layernorm_weight_grads.cuh: dx with dweight and dbias summed on the way,
// then a small kernel adding the blocks' partial sums) with the residual's backward folded in: the row's
// gradient of residual, dresidual + dx, goes straight into da and db. The unfused chain writes dx to a
// temporary and reads it back for the residual's backward.
//
// Shapes the register rows cannot take (C not a multiple of 4, C above 1664, rows not 16-byte aligned; no
// GPT-2 model has such a width) run the core's unfused ops instead, with the same results.
//
// 16-bit activations (and the backward's pass-through form, fused_residual_layernorm_backward_through) run the core
// LayerNorm's 16-byte-piece kernels with the add folded in (common/ops/cuda/layernorm_pieces.h): the forward reads a
// and b and writes the sum and the output, 8 bytes an element in 16 bits, where residual_forward and
// layernorm_forward read 10 (the sum read back); the backward writes the add's second input's gradient in the pass
// that writes dx, where a copy kernel read dx again. At GPT-2 d12, B = 32, T = 1024 in bf16 that is 50.3 MB not
// read in each direction, 12 times a step (once a block: the block's second add ends the block, and the next
// LayerNorm is the next block's), 1.2 GB, and 24 launches.
#include "ch06_single_gpu/chunk_totals.cuh"
#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_weight_grads.cuh"
#include "ch06_single_gpu/kernels/02_layernorm/row_in_registers.cuh"
#include "common/core/memory.h"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/layernorm_pieces.h"
#include "common/ops/layernorm.h"
#include "common/ops/residual.h"

namespace lab::ch06::cuda {

namespace {

using ops::cuda::kBlockSize;
constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

// ---------------------------------------------------------------- kernels

template <int kChunks>
__global__ void __launch_bounds__(kBlockSize)
    fused_residual_layernorm_forward_kernel(float* residual, float* out, float* mean, float* rstd, const float* a,
                                            const float* b, const float* weight, const float* bias, int64_t N,
                                            int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;  // the whole warp leaves: no collective is left waiting
  RegisterRow<kChunks> x, y;
  x.load(a + row * C, C, lane);
  y.load(b + row * C, C, lane);
  x.add(y);
  x.store(residual + row * C, C, lane);
  const RowStatistics s = row_statistics(x, C, lane, ops::kLayerNormEps);
  normalise_row(x, s, weight, bias, C, lane);
  x.store(out + row * C, C, lane);
  if (lane == 0) {
    mean[row] = s.mean;
    rstd[row] = s.rstd;
  }
}

template <int kChunks>
__global__ void __launch_bounds__(kGradThreads)
    fused_residual_layernorm_backward_kernel(float* da, float* db, float* partials, const float* dresidual,
                                             const float* dout, const float* residual, const float* weight,
                                             const float* mean, const float* rstd, int64_t N, int64_t C,
                                             int64_t rows_per_block) {
  LAB_DYNAMIC_SHARED(float, shared);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  RegisterRow<kChunks> dweight_sum, dbias_sum;
  dweight_sum.fill(0.0f);
  dbias_sum.fill(0.0f);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t end = begin + rows_per_block < N ? begin + rows_per_block : N;
  for (int64_t row = begin + warp; row < end; row += kGradWarps) {
    RegisterRow<kChunks> g, x;
    g.load(dout + row * C, C, lane);
    x.load(residual + row * C, C, lane);
    row_input_gradient(g, x, weight, mean[row], rstd[row], C, lane, dweight_sum, dbias_sum);
    if (dresidual != nullptr) {  // read before da and db are written: either may be dresidual itself
      x.load(dresidual + row * C, C, lane);
      g.add(x);
    }
    if (da != nullptr) g.add_into(da + row * C, C, lane);
    if (db != nullptr) g.add_into(db + row * C, C, lane);
  }
  write_block_partials(partials, dweight_sum, dbias_sum, shared, C);  // every thread, after its rows
}

// A defined tensor's data, or null.
const float* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}
float* mutable_data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}

}  // namespace

// ---------------------------------------------------------------- launchers

void fused_residual_layernorm_forward(const Tensor& residual, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& bias) {
  const int64_t C = a.dim(-1);
  if (C == 0 || a.numel() == 0) return;
  const int64_t N = a.numel() / C;
  if (a.dtype() != DType::F32) {
    if (!ops::cuda::residual_layernorm_forward_in_pieces(residual, out, mean, rstd, a, b, weight, bias)) {
      ops::cuda::residual_forward(residual, a, b);
      ops::cuda::layernorm_forward(out, mean, rstd, residual, weight, bias);
    }
    return;
  }
  if (!fits_register_row(C, {residual.raw(), out.raw(), a.raw(), b.raw(), weight.raw(), bias.raw()})) {
    ops::cuda::residual_forward(residual, a, b);
    ops::cuda::layernorm_forward(out, mean, rstd, residual, weight, bias);
    return;
  }
  ops::cuda::LaunchScope scope(a);
  launch_for_row_width(C, [&]<int kChunks>() {
    LAB_LAUNCH((fused_residual_layernorm_forward_kernel<kChunks>),
               {ops::cuda::grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()}, residual.data<float>(),
               out.data<float>(), mean.data<float>(), rstd.data<float>(), a.data<float>(), b.data<float>(),
               weight.data<float>(), bias.data<float>(), N, C);
  });
}

void fused_residual_layernorm_backward(const Tensor& da, const Tensor& db, const Tensor& dweight, const Tensor& dbias,
                                       const Tensor& dresidual, const Tensor& dout, const Tensor& residual,
                                       const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                       ops::GradWrite dparams_write) {
  const int64_t C = residual.dim(-1);
  if (C == 0 || residual.numel() == 0) return;
  const int64_t N = residual.numel() / C;
  MemoryScope workspace(MemCategory::Workspace);
  const auto raw_or_null = [](const Tensor& t) -> const void* { return t.defined() ? t.raw() : nullptr; };
  if (!fits_register_row(
          C, {raw_or_null(da), raw_or_null(db), raw_or_null(dresidual), dout.raw(), residual.raw(), weight.raw()})) {
    // The unfused chain: the LayerNorm's dx added onto a copy of dresidual (or, without one, written over a new
    // buffer), then the residual's backward.
    const Tensor total =
        dresidual.defined() ? dresidual.clone() : Tensor::empty(residual.shape(), DType::F32, residual.device());
    ops::cuda::layernorm_backward(total, dweight, dbias, dout, residual, weight, mean, rstd,
                                  dresidual.defined() ? ops::GradWrite::Add : ops::GradWrite::Overwrite, dparams_write);
    ops::cuda::residual_backward(da, db, total);
    return;
  }
  ops::cuda::LaunchScope scope(residual);
  const WeightGradSplit split = weight_grad_split(N);
  const Tensor partials = Tensor::empty({2, split.blocks, C}, DType::F32, residual.device());
  const size_t shared_bytes = 2 * static_cast<size_t>(C) * sizeof(float);
  launch_for_row_width(C, [&]<int kChunks>() {
    LAB_LAUNCH((fused_residual_layernorm_backward_kernel<kChunks>),
               {static_cast<unsigned int>(split.blocks), kGradThreads, shared_bytes, scope.stream()},
               mutable_data_or_null(da), mutable_data_or_null(db), partials.data<float>(), data_or_null(dresidual),
               dout.data<float>(), residual.data<float>(), weight.data<float>(), mean.data<float>(), rstd.data<float>(),
               N, C, split.rows_per_block);
  });
  add_chunk_totals<2>({{dweight.data<float>(), dbias.data<float>()}, dparams_write == ops::GradWrite::Add},
                      partials.data<float>(), split.blocks, C, scope.stream());
}

void fused_residual_layernorm_backward_through(const Tensor& dsum, ops::GradWrite dsum_write, const Tensor& dcopy,
                                               const Tensor& dweight, const Tensor& dbias, const Tensor& dout,
                                               const Tensor& residual, const Tensor& weight, const Tensor& mean,
                                               const Tensor& rstd, ops::GradWrite dparams_write) {
  if (ops::cuda::layernorm_backward_in_pieces(dsum, dcopy, dweight, dbias, dout, residual, weight, mean, rstd,
                                              dsum_write, dparams_write))
    return;
  ops::cuda::layernorm_backward(dsum, dweight, dbias, dout, residual, weight, mean, rstd, dsum_write, dparams_write);
  if (dcopy.defined()) ops::cuda::residual_gradient_copy(dcopy, dsum);
}

}  // namespace lab::ch06::cuda
