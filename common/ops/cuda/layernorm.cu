// CUDA kernels of common/ops/layernorm.h, for f32, bf16 and f16 activations with fp32 arithmetic
// (dtype_dispatch.cuh); weight, bias, their gradients and the statistics are f32 whatever the activations are.
//
// Forward and the dx part of the backward: one warp per row. The 32 lanes stride over the row's C channels
// (coalesced), and warp shuffles combine their partial sums, with no shared memory and no block barrier; a warp
// whose row is past the end leaves as a whole. The forward makes two passes for the statistics (mean, then the
// variance around it: numerically safer than E[x^2] - E[x]^2) and a third to write. Rows that split into 16-byte
// pieces (GPT-2's) are loaded once, a piece at a time, and the passes read the registers
// (layernorm_forward_pieces_kernel); other rows are read element by element, three times, from L1/L2.
//
// dw and db are column sums over all N rows. Rows of 16-byte pieces (GPT-2's) take them in the dx kernel's pass,
// from the loads dx makes (layernorm_backward_pieces_kernel); other rows in a pass of their own over dout and x
// (column_sums.cuh). Either way the rows split over enough blocks to fill the GPU, each writes partial sums, and a
// small kernel adds them in a fixed order: deterministic, no atomics.
//
// The 16-byte-piece kernels also run chapter 6's residual add fused with the LayerNorm after it
// (layernorm_pieces.h): the forward adds the add's two inputs as it loads them, stores the sum and normalises it
// from the registers; the backward writes its dx a second time, into the add's other input's gradient.
#include <cstdint>
#include <type_traits>

#include "common/ops/cuda/column_sums.cuh"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/layernorm_pieces.h"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/dispatch.h"
#include "common/ops/layernorm.h"

namespace lab::ops::cuda {

namespace {

constexpr int kRowsPerBlock = kBlockSize / kWarpSize;

// ---------------------------------------------------------------- kernels

template <typename D>
__global__ void layernorm_forward_kernel(D* out, float* mean, float* rstd, const D* x, const float* w, const float* b,
                                         int64_t N, int64_t C) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const D* xr = x + row * C;
  float sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) sum += load(xr[c]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float d = load(xr[c]) - m;
    sq += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kLayerNormEps);
  D* outr = out + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) outr[c] = store_as<D>((load(xr[c]) - m) * s * w[c] + b[c]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// The forward for rows of `pieces` 16-byte pieces, at most kPieces a lane: the lane loads its pieces of the row
// once, 16 bytes a load, and keeps them in registers for the statistics and the output. The kernel above loads
// one element (2 bytes in 16 bits) at a time, three times a row: too few bytes in flight to reach the GPU's
// bandwidth. kSum: the row normalised is x + branch, each element rounded to D as residual_forward rounds it, and
// that sum is stored into `sum` on the way (the same bits as residual_forward, then this kernel on its output).
template <typename D, int kPieces, bool kSum>
__global__ void layernorm_forward_pieces_kernel(D* out, float* mean, float* rstd, const D* x, const float* w,
                                                const float* b, int64_t N, int pieces, D* sum, const D* branch) {
  constexpr int kPer = Piece<D>::kElements;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (row >= N) return;
  const int64_t C = static_cast<int64_t>(pieces) * kPer;
  const Piece<D>* xr = reinterpret_cast<const Piece<D>*>(x + row * C);
  Piece<D> xv[kPieces] = {};  // only the pieces below `pieces` are read
  float row_sum = 0.0f;
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int piece = lane + p * kWarpSize;
    if (piece >= pieces) continue;
    xv[p] = xr[piece];
    if constexpr (kSum) {
      const Piece<D> bv = reinterpret_cast<const Piece<D>*>(branch + row * C)[piece];
#pragma unroll
      for (int e = 0; e < kPer; ++e) xv[p].e[e] = store_as<D>(load(xv[p].e[e]) + load(bv.e[e]));
      reinterpret_cast<Piece<D>*>(sum + row * C)[piece] = xv[p];
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) row_sum += load(xv[p].e[e]);
  }
  const float m = warp_sum(row_sum) / static_cast<float>(C);
  float sq = 0.0f;
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    if (lane + p * kWarpSize >= pieces) continue;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const float d = load(xv[p].e[e]) - m;
      sq += d * d;
    }
  }
  const float s = 1.0f / sqrtf(warp_sum(sq) / static_cast<float>(C) + kLayerNormEps);
  Piece<D>* outr = reinterpret_cast<Piece<D>*>(out + row * C);
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int piece = lane + p * kWarpSize;
    if (piece >= pieces) continue;
    Piece<D> o;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int64_t c = static_cast<int64_t>(piece) * kPer + e;
      o.e[e] = store_as<D>((load(xv[p].e[e]) - m) * s * w[c] + b[c]);
    }
    outr[piece] = o;
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  with g = dout * w; without `add`, dx = ..., dx not read
template <typename D>
__global__ void layernorm_backward_dx_kernel(D* dx, const D* dout, const D* x, const float* w, const float* mean,
                                             const float* rstd, int64_t N, int64_t C, bool add) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const D* xr = x + row * C;
  const D* dr = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float g = load(dr[c]) * w[c];
    g_sum += g;
    gx_sum += g * (load(xr[c]) - m) * s;
  }
  const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
  const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
  D* dxr = dx + row * C;
  for (int64_t c = lane; c < C; c += kWarpSize) {
    const float xhat = (load(xr[c]) - m) * s;
    dxr[c] = store_as<D>((add ? load(dxr[c]) : 0.0f) + s * (load(dr[c]) * w[c] - g_mean - xhat * gx_mean));
  }
}

// The whole backward for rows that split into 16-byte pieces (C a multiple of 16 / sizeof(D), rows 16-byte aligned),
// at most kPieces per lane, in one pass over dout and x: dx as above, and dw, db from the same loads.
//   - Block b, of kBackwardWarps warps, takes rows [b * rows_per_block, (b + 1) * rows_per_block), warp w every
//     kBackwardWarps-th of them from the w-th. Each lane loads its pieces of a row of x and dout once, in 16-byte
//     loads, and keeps them in registers for the second half, where the loop above reads the row twice in loads of
//     one element (2 bytes a lane in 16 bits: on an H200 that kernel moved about 0.25 TB/s, 198 us a call at
//     GPT-2's 8192 x 768 in bf16).
//   - The lane also adds dout * xhat and dout of its pieces' columns into its warp's sums in shared memory, so dw
//     and db need no second pass over dout and x (the column sums of WeightAndBiasTerms read both again). Each lane
//     owns its slots, so no barrier is needed until the end; in registers the sums would double the kernel's
//     registers and halve its resident warps.
//   - At the end the block adds its warps' sums in warp order and writes one partial sum per column of each,
//     partials[(k * gridDim.x + b) * C + c] with k = 0 for dw and 1 for db, which add_column_totals adds in a
//     fixed order. The rows per block depend only on N (column_split), so the bits of dw and db are the same on
//     every GPU.
//   - dx_copy, when not null, receives the same values as dx (the residual add's second input, fused).
constexpr int kBackwardWarps = 4;
// About four such blocks per SM of an H100; at GPT-2's 8192 rows, 512 blocks of 16 rows (column_split keeps at least
// kColumnRows a block).
constexpr int64_t kBackwardBlocks = 528;

template <typename D, int kPieces>
__global__ void layernorm_backward_pieces_kernel(D* dx, D* dx_copy, float* partials, const D* dout, const D* x,
                                                 const float* w, const float* mean, const float* rstd, int64_t N,
                                                 int pieces, int64_t rows_per_block, bool add) {
  constexpr int kPer = Piece<D>::kElements, kSlots = kPieces * kPer * kWarpSize;
  // Warp w's sums of dw (k = 0) and db (k = 1); element e of lane i's p-th piece at slot (p * kPer + e) * 32 + i,
  // so the lanes of a warp reach 32 banks. At most 48 KiB (kPieces = 6 in 16 bits).
  __shared__ float warp_sums[kBackwardWarps][2][kSlots];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  float(&dw_sum)[kSlots] = warp_sums[warp][0];
  float(&db_sum)[kSlots] = warp_sums[warp][1];
  for (int slot = lane; slot < kSlots; slot += kWarpSize) dw_sum[slot] = db_sum[slot] = 0.0f;
  const int64_t C = static_cast<int64_t>(pieces) * kPer;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t end = begin + rows_per_block < N ? begin + rows_per_block : N;
  for (int64_t row = begin + warp; row < end; row += kBackwardWarps) {  // no early return: the barrier below
    const Piece<D>* xr = reinterpret_cast<const Piece<D>*>(x + row * C);
    const Piece<D>* dr = reinterpret_cast<const Piece<D>*>(dout + row * C);
    const float m = mean[row], s = rstd[row];
    Piece<D> xv[kPieces] = {}, dv[kPieces] = {};  // only the pieces below `pieces` are read
    float g_sum = 0.0f, gx_sum = 0.0f;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int piece = lane + p * kWarpSize;
      if (piece >= pieces) continue;
      xv[p] = xr[piece];
      dv[p] = dr[piece];
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const float g = load(dv[p].e[e]) * w[piece * kPer + e];
        g_sum += g;
        gx_sum += g * (load(xv[p].e[e]) - m) * s;
      }
    }
    const float g_mean = warp_sum(g_sum) / static_cast<float>(C);
    const float gx_mean = warp_sum(gx_sum) / static_cast<float>(C);
    Piece<D>* dxr = reinterpret_cast<Piece<D>*>(dx + row * C);
#pragma unroll
    for (int p = 0; p < kPieces; ++p) {
      const int piece = lane + p * kWarpSize;
      if (piece >= pieces) continue;
      Piece<D> out;
      if (add) out = dxr[piece];  // without `add`, dx is written, never read
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        const float xhat = (load(xv[p].e[e]) - m) * s;
        const float d = load(dv[p].e[e]);
        out.e[e] = store_as<D>((add ? load(out.e[e]) : 0.0f) + s * (d * w[piece * kPer + e] - g_mean - xhat * gx_mean));
        const int slot = (p * kPer + e) * kWarpSize + lane;
        dw_sum[slot] += d * xhat;
        db_sum[slot] += d;
      }
      dxr[piece] = out;
      if (dx_copy != nullptr) reinterpret_cast<Piece<D>*>(dx_copy + row * C)[piece] = out;
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {  // column c: element c % kPer of piece c / kPer
    const int64_t piece = c / kPer;
    const int64_t slot = ((piece / kWarpSize) * kPer + c % kPer) * kWarpSize + piece % kWarpSize;
    float dw_total = 0.0f, db_total = 0.0f;
    for (int v = 0; v < kBackwardWarps; ++v) {
      dw_total += warp_sums[v][0][slot];
      db_total += warp_sums[v][1][slot];
    }
    partials[static_cast<int64_t>(blockIdx.x) * C + c] = dw_total;
    partials[(static_cast<int64_t>(gridDim.x) + blockIdx.x) * C + c] = db_total;
  }
}

// The pieces a lane takes of a row of `pieces` 16-byte pieces, for the kernels above: 1, 2, 3, 4 or 6 (C up to 1536
// in 16 bits, 768 in f32), or 0 when the row is wider or does not split into pieces.
int64_t pieces_per_lane(int64_t pieces) {
  const int64_t per_lane = ceil_div(pieces, int64_t{kWarpSize});
  return pieces == 0 || per_lane > 6 ? 0 : per_lane == 5 ? 6 : per_lane;
}

// Calls launch(std::integral_constant<int, kPieces>) for a count from pieces_per_lane.
template <typename Launch>
void with_pieces_per_lane(int64_t per_lane, const Launch& launch) {
  switch (per_lane) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 3: launch(std::integral_constant<int, 3>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    default: launch(std::integral_constant<int, 6>{}); break;
  }
}

// Launches the forward's 16-byte-piece kernel (with the residual add in front when `branch` is not null) when the
// rows allow it (pieces_per_lane); false, with nothing queued, otherwise.
template <typename D>
bool launch_forward_in_pieces(D* out, float* mean, float* rstd, const D* x, const float* w, const float* b, D* sum,
                              const D* branch, int64_t N, int64_t C, cudaStream_t stream) {
  const int64_t pieces = pieces_of<D>(C, out, x, sum, branch);  // null is aligned
  const int64_t per_lane = pieces_per_lane(pieces);
  if (per_lane == 0) return false;
  const lab::cuda::LaunchConfig config{grid_for(N, kRowsPerBlock), kBlockSize, 0, stream};
  const int n = static_cast<int>(pieces);
  with_pieces_per_lane(per_lane, [&](auto count) {
    constexpr int kPieces = decltype(count)::value;
    if (branch != nullptr)
      LAB_LAUNCH((layernorm_forward_pieces_kernel<D, kPieces, true>), config, out, mean, rstd, x, w, b, N, n, sum,
                 branch);
    else
      LAB_LAUNCH((layernorm_forward_pieces_kernel<D, kPieces, false>), config, out, mean, rstd, x, w, b, N, n, sum,
                 branch);
  });
  return true;
}

// Launches the backward's 16-byte-piece kernel, then the totals of its partial sums into dw and db, when the rows
// allow it (pieces_per_lane); false, with nothing queued, otherwise. dx_copy may be null.
template <typename D>
bool launch_backward_in_pieces(D* dx, D* dx_copy, float* dw, float* db, const D* dout, const D* x, const float* w,
                               const float* mean, const float* rstd, int64_t N, int64_t C, bool add, bool add_params,
                               Device device, cudaStream_t stream) {
  // A row's pieces; with C a whole number of pieces and aligned starts, every row starts aligned too.
  const int64_t pieces = pieces_of<D>(C, dx, dx_copy, dout, x);
  const int64_t per_lane = pieces_per_lane(pieces);
  if (per_lane == 0) return false;
  // One column block of all C columns; about kBackwardBlocks chunks of at least kColumnRows rows.
  const ColumnSplit split = column_split(N, C, C, kBackwardBlocks);
  MemoryScope workspace(MemCategory::Workspace);
  const Tensor partials = Tensor::empty({2, split.row_chunks, C}, DType::F32, device);
  const lab::cuda::LaunchConfig config{static_cast<unsigned int>(split.row_chunks), kBackwardWarps * kWarpSize, 0,
                                       stream};
  const int n = static_cast<int>(pieces);
  float* sums = partials.data<float>();
  const int64_t rows = split.rows_per_chunk;
  with_pieces_per_lane(per_lane, [&](auto count) {
    constexpr int kPieces = decltype(count)::value;
    LAB_LAUNCH((layernorm_backward_pieces_kernel<D, kPieces>), config, dx, dx_copy, sums, dout, x, w, mean, rstd, N, n,
               rows, add);
  });
  add_column_totals<2>({{dw, db}, add_params}, sums, split.row_chunks, C, stream);
  return true;
}

// The summands of dw[c] += sum_n dout[n, c] * xhat[n, c] and db[c] += sum_n dout[n, c], in f32 whatever D is.
template <typename D>
struct WeightAndBiasTerms {
  const D* dout;
  const D* x;
  const float* mean;
  const float* rstd;
  int64_t C;
  __device__ void add(int64_t n, int64_t c, float (&part)[2]) const {
    const float d = load(dout[n * C + c]);
    part[0] += d * (load(x[n * C + c]) - mean[n]) * rstd[n];
    part[1] += d;
  }
};

}  // namespace

// ---------------------------------------------------------------- launchers

void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& w,
                       const Tensor& b) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  dispatch_float_dtype(x.dtype(), "layernorm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    if (launch_forward_in_pieces<D>(device_data<T>(out), mean.data<float>(), rstd.data<float>(), device_data<T>(x),
                                    w.data<float>(), b.data<float>(), nullptr, nullptr, N, C, scope.stream()))
      return;
    LAB_LAUNCH(layernorm_forward_kernel<D>, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
               device_data<T>(out), mean.data<float>(), rstd.data<float>(), device_data<T>(x), w.data<float>(),
               b.data<float>(), N, C);
  });
}

void layernorm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dout, const Tensor& x,
                        const Tensor& w, const Tensor& mean, const Tensor& rstd, GradWrite dx_write,
                        GradWrite dparams_write) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return;
  const int64_t N = x.numel() / C;
  const bool add = dx_write == GradWrite::Add, add_params = dparams_write == GradWrite::Add;
  LaunchScope scope(x);
  dispatch_float_dtype(x.dtype(), "layernorm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using D = typename DeviceType<T>::type;
    if (launch_backward_in_pieces(device_data<T>(dx), static_cast<D*>(nullptr), dw.data<float>(), db.data<float>(),
                                  device_data<T>(dout), device_data<T>(x), w.data<float>(), mean.data<float>(),
                                  rstd.data<float>(), N, C, add, add_params, x.device(), scope.stream()))
      return;
    LAB_LAUNCH(layernorm_backward_dx_kernel<D>, {grid_for(N, kRowsPerBlock), kBlockSize, 0, scope.stream()},
               device_data<T>(dx), device_data<T>(dout), device_data<T>(x), w.data<float>(), mean.data<float>(),
               rstd.data<float>(), N, C, add);
    add_column_sums<2>(
        {{dw.data<float>(), db.data<float>()}, add_params},
        WeightAndBiasTerms<D>{device_data<T>(dout), device_data<T>(x), mean.data<float>(), rstd.data<float>(), C}, N, C,
        x.device(), scope.stream());
  });
}

bool residual_layernorm_forward_in_pieces(const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                                          const Tensor& a, const Tensor& b, const Tensor& w, const Tensor& bias) {
  const int64_t C = a.dim(-1);
  if (C == 0 || a.numel() == 0) return true;
  const int64_t N = a.numel() / C;
  LaunchScope scope(a);
  bool launched = false;
  dispatch_float_dtype(a.dtype(), "residual_layernorm_forward_in_pieces", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launched = launch_forward_in_pieces(device_data<T>(out), mean.data<float>(), rstd.data<float>(), device_data<T>(a),
                                        w.data<float>(), bias.data<float>(), device_data<T>(sum), device_data<T>(b), N,
                                        C, scope.stream());
  });
  return launched;
}

bool layernorm_backward_in_pieces(const Tensor& dx, const Tensor& dx_copy, const Tensor& dw, const Tensor& db,
                                  const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, GradWrite dx_write, GradWrite dparams_write) {
  const int64_t C = x.dim(-1);
  if (C == 0 || x.numel() == 0) return true;
  const int64_t N = x.numel() / C;
  LaunchScope scope(x);
  bool launched = false;
  dispatch_float_dtype(x.dtype(), "layernorm_backward_in_pieces", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launched = launch_backward_in_pieces(device_data<T>(dx), device_data_or_null<T>(dx_copy), dw.data<float>(),
                                         db.data<float>(), device_data<T>(dout), device_data<T>(x), w.data<float>(),
                                         mean.data<float>(), rstd.data<float>(), N, C, dx_write == GradWrite::Add,
                                         dparams_write == GradWrite::Add, x.device(), scope.stream());
  });
  return launched;
}

}  // namespace lab::ops::cuda
