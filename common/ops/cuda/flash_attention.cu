// CUDA flash attention (common/ops/flash_attention.h): bf16 and f16 inputs, products on tensor cores with f32
// accumulation, the softmax in f32, in the manner of FlashAttention-2. The CPU version (cpu/flash_attention.cpp)
// takes the same steps with the same 64 x 64 tiles.
//
// Every kernel runs 4 warps (128 threads) on one 64-row tile of one (batch, head); each warp owns 16 of the
// tile's rows from start to end. Shared memory holds only the 16-bit tiles that the warps share (Q, K, V, dO;
// rows padded by 8 elements, so that the 8 rows an ldmatrix reads fall in different banks) and, in the
// backward, the lse and D of a query tile. Everything a warp computes stays in its registers: the products are
// mma.sync m16n8k16 with operands loaded by ldmatrix (warp_mma.cuh), whose fragment layouts are documented, so
// each lane knows the (row, column) of every score it holds. Hence the causal mask per element, row maxima and
// sums over the 4 lanes that share a row (two shuffles), rows rescaled in place, and the f32 score fragments of
// two adjacent n8 tiles rounded and packed into the A fragment of the next product (P V, P^T dO, dS^T Q, dS K)
// without leaving registers. The softmax runs in base 2 (exp2 of scores times scale log2 e).
//
// Loads overlap the products (v7 of chapter 9's attention lab; v6 loaded each tile, waited at a barrier, then
// multiplied it): a streamed tile has two buffers, and while the warps multiply tile j the block's copies of tile
// j + 1 are in flight, issued by cp.async (__pipeline_memcpy_async: global to shared memory without passing
// through registers; the thread goes on at once) and waited for (__pipeline_wait_prior) just before the barrier
// that precedes their first reader. The causal mask's index arithmetic runs on the diagonal tiles only (and on a
// last tile that passes T): every tile before the diagonal is seen whole by every query of the tile, so its
// kernel body is a second instantiation without the mask.
//
//   forward        one block per query tile; the warp's Q fragments loaded once; key tiles 0 .. the diagonal
//                  streamed through shared memory (tiles above it are entirely masked and never loaded; on the
//                  diagonal a warp skips the n8 tiles past its last query); S = Q K^T, online softmax with the
//                  row max and sum in registers, O += P V into register accumulators; writes O and the row
//                  log-sum-exp. Blocks are numbered so that the longest tiles (the last queries see every key)
//                  start first and the short ones fill in at the end of the grid, as FlashAttention-2 orders them.
//                  The kernel is flash_attention_forward.cuh's with one strip of 16 queries a warp (its R = 1;
//                  FlashTiles::Rows128 runs R = 2, 128-query tiles: chapter 9's lab's v11).
//   D pre-pass     D = rowsum(dO * O), one warp per row.
//   dK, dV         one block per key tile; query tiles from the diagonal to the end streamed, 32 queries at a
//                  time (64 queries of f32 P^T and dS^T next to the dK and dV accumulators would not fit the
//                  registers at head size 128); S^T = K Q^T and dP^T = V dO^T, P^T recomputed from the saved
//                  log-sum-exp, dS^T = P^T (dP^T - D), dV += P^T dO and dK += dS^T Q (dO and Q as B operands
//                  by ldmatrix .trans).
//   dQ             one block per query tile, key tiles 0 .. the diagonal: S, P, dP and dS again, dQ += dS K.
//                  Both are flash_attention_backward.cuh's kernels with one strip of 16 rows a warp (their R = 1;
//                  FlashTiles::Rows128 runs R = 2, 128-row tiles, as the lab's v12, and Rows128Steps16 that with
//                  the dK/dV kernel in steps of 16 queries, v13).
// Which set runs (ops::FlashTiles, common/ops/flash_attention.h): Rows64 by default; Timed times the sets at each
// shape's first call and keeps the fastest (common/cuda/time_candidates.h), which is safe because every set gives
// the same bits. Which one wins depends on the GPU: with two strips each fragment read from shared memory feeds
// twice the products, but the backward kernels take 231-255 registers a thread and run 2 blocks per SM, not 3.
// dQ by a separate pass, not by atomics from the dK/dV blocks: the dK/dV blocks would have to add into an f32
// copy of dQ (16-bit atomics round at every add) that then needs its own conversion pass anyway, and the result
// would depend on the order in which blocks arrive. The separate pass recomputes S and dP (7 tile products per
// tile pair instead of 5, 40% more backward math), but is deterministic, needs no [B,T,C] f32 workspace, and
// adds into dqkv in its own dtype as the dK/dV pass does. FlashAttention-2 uses atomics: FlashBackward::OnePass
// runs that algorithm on these kernels (flash_attention_one_pass.cu, chapter 9's attention lab's v9), to measure
// the two side by side.
//
// Resources at sm_90 (nvcc 13 -O3, ptxas -v; no spills, no local memory), registers per thread and dynamic shared
// memory per block of 128 threads, head size 64 | 128:
//   forward       159 | 212 registers, 45 | 85 KiB      (Q, two K and two V buffers)
//   dK, dV        163 | 244 registers, 55 | 103 KiB     (K, V, two Q, dO and lse/D buffers)
//   dQ            168 | 234 registers, 54 | 102 KiB     (Q, dO, two K and two V buffers)
// Registers are the limit: 3 blocks (12 warps) per SM at head size 64, 2 at 128, which is what each kernel's
// __launch_bounds__ asks ptxas for (asking for more made it spill); the second buffers fit beside them. A copy
// loop that kept every copy's address live across the tile loop spilled the dK/dV kernel; issue_tile keeps one
// base address a tile. On one H200 (chapter 9's attention lab, GPT-2 d12 shape B = 8, T = 1024, 12 heads of 64,
// bf16; `ch09_attention_lab [--pass backward] --version 6,7`, medians of 20, L2 flushed, 2026-11-28) the forward
// takes 0.095 ms and the backward 0.309 ms, against 0.124 and 0.411 ms for v6 in the same run (1.30x, 1.33x);
// at 6 heads of 128, 0.093 and 0.324 ms against 0.159 and 0.451 (1.71x, 1.39x).
//
// f32 inputs: not flash attention. They take the materialised path of attention.h (cuBLAS in the math mode of
// common/cuda/cublas.h) with the T x T probabilities in a workspace for the duration of the call; the
// log-sum-exp is recovered from the probabilities (below), and the backward recomputes them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/core/memory.h"
#include "common/cuda/time_candidates.h"
#include "common/ops/attention.h"
#include "common/ops/cuda/flash_attention_backward.cuh"
#include "common/ops/cuda/flash_attention_forward.cuh"
#include "common/ops/cuda/flash_attention_fragments.cuh"
#include "common/ops/cuda/flash_attention_one_pass.h"
#include "common/ops/cuda/flash_attention_pipeline.cuh"
#include "common/ops/cuda/flash_attention_tiles.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/reductions.cuh"
#include "common/ops/cuda/warp_mma.cuh"
#include "common/ops/flash_attention.h"

namespace lab::ops::cuda {

namespace {

using namespace flash;  // tile geometry, Dims, fragments, the D pre-pass, launch helpers

// ---------------------------------------------------------------- f32: the materialised fallback

// lse of row (b, h, t) from its probabilities: p_s = exp(scale q_t.k_s - lse) for every s, so
// lse = scale q_t.k_s - log p_s. Taken at the row's largest probability (at least 1/(t+1), never underflowed).
// One warp per row.
__global__ void lse_from_probabilities_kernel(float* lse, const float* att, const float* qkv, int64_t rows, Dims s) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowsPerBlock + threadIdx.x / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (r >= rows) return;
  const int64_t bh = r / s.T;
  const int t = static_cast<int>(r % s.T), b = static_cast<int>(bh / s.NH), h = static_cast<int>(bh % s.NH);
  const float* row = att + r * s.T;
  float best = -1.0f;
  int best_key = 0;
  for (int key = lane; key <= t; key += kWarpSize)
    if (row[key] > best) best = row[key], best_key = key;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, best, offset);
    const int other_key = __shfl_xor_sync(kFullMask, best_key, offset);
    if (other > best || (other == best && other_key < best_key)) best = other, best_key = other_key;
  }
  const int64_t ld = 3 * static_cast<int64_t>(s.C);
  const float* q = qkv + static_cast<int64_t>(b) * s.T * ld + static_cast<int64_t>(t) * ld + h * s.hs;
  const float* k = qkv + static_cast<int64_t>(b) * s.T * ld + static_cast<int64_t>(best_key) * ld + s.C + h * s.hs;
  float dot = 0.0f;
  for (int c = lane; c < s.hs; c += kWarpSize) dot += q[c] * k[c];
  dot = warp_sum(dot);
  if (lane == 0) lse[r] = s.scale * dot - logf(best);
}

Tensor probabilities_workspace(const Tensor& qkv, int n_head) {
  const MemoryScope scope(MemCategory::Workspace);
  return Tensor::empty({qkv.dim(0), n_head, qkv.dim(1), qkv.dim(1)}, DType::F32, qkv.device());
}

// ---------------------------------------------------------------- the kernel sets (ops::FlashTiles)

void forward_with(FlashTiles tiles, const Tensor& out, const Tensor& lse, const Tensor& qkv, const Dims& s,
                  cudaStream_t stream) {
  if (tiles == FlashTiles::Rows64)
    launch_flash_forward<1>("flash_forward_kernel", out, lse, qkv, s, stream);
  else
    launch_flash_forward<2>("flash_forward_kernel_rows128", out, lse, qkv, s, stream);
}

void backward_with(FlashTiles tiles, const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                   const Tensor& lse, const Dims& s, cudaStream_t stream, bool add) {
  if (tiles == FlashTiles::Rows128)
    launch_flash_backward<2>(dqkv, dout, qkv, out, lse, s, stream, add);
  else if (tiles == FlashTiles::Rows128Steps16)
    launch_flash_backward<2, 16>(dqkv, dout, qkv, out, lse, s, stream, add);
  else
    launch_flash_backward<1>(dqkv, dout, qkv, out, lse, s, stream, add);
}

// ---------------------------------------------------------------- FlashTiles::Timed

// (backward?, dtype, B, heads, T, head size, device): the shape a choice holds for.
using ShapeKey = std::tuple<bool, DType, int64_t, int, int, int, int>;

// The sets timed so far, and the report of each choice (ops::flash_tile_choices). Shared by every thread: ranks
// may be threads of one process.
struct TileChoices {
  std::mutex mutex;
  std::map<ShapeKey, FlashTiles> chosen;
  std::vector<std::string> report;
};

TileChoices& tile_choices() {
  static TileChoices choices;
  return choices;
}

std::string milliseconds(float ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f ms", static_cast<double>(ms));
  return text;
}

std::string shape_line(bool backward, const Tensor& qkv, const Dims& s) {
  return cat("flash ", backward ? "backward " : "forward ", dtype_name(qkv.dtype()), " B ", qkv.dim(0), " x ", s.NH,
             " heads x T ", s.T, ", head size ", s.hs);
}

// The set that `tiles` names for this call; for Timed, the one chosen at this shape, timing the sets first when
// none is (`run` queues one set's work on the current stream, `stream`). Heads wider than 64 have one set (one
// strip a warp: two would not fit the registers), so every choice is Rows64 there; a stream under capture cannot
// be timed, and a shape not yet timed runs Rows64.
FlashTiles resolve_tiles(FlashTiles tiles, bool backward, const Tensor& qkv, const Dims& s, cudaStream_t stream,
                         const std::function<void(FlashTiles)>& run) {
  if (s.hs > 64) return FlashTiles::Rows64;
  if (tiles != FlashTiles::Timed) return tiles;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const ShapeKey key{backward, qkv.dtype(), qkv.dim(0), s.NH, s.T, s.hs, device};
  TileChoices& choices = tile_choices();
  {
    const std::lock_guard<std::mutex> lock(choices.mutex);
    if (const auto found = choices.chosen.find(key); found != choices.chosen.end()) return found->second;
  }
  if (lab::cuda::capturing(stream)) return FlashTiles::Rows64;
  std::vector<FlashTiles> sets = {FlashTiles::Rows64, FlashTiles::Rows128};
  if (backward) sets.push_back(FlashTiles::Rows128Steps16);
  std::vector<std::function<void()>> candidates;
  for (const FlashTiles set : sets) candidates.push_back([&run, set] { run(set); });
  const lab::cuda::TimedCandidates timed = lab::cuda::time_candidates(candidates);
  std::string line = cat(shape_line(backward, qkv, s), ": ", flash_tiles_name(sets[timed.fastest]), " (");
  for (size_t i = 0; i < sets.size(); ++i)
    line += cat(i == 0 ? "" : " | ", flash_tiles_name(sets[i]), ": ", milliseconds(timed.ms[i]));
  line += ")";
  const std::lock_guard<std::mutex> lock(choices.mutex);
  const auto [kept, inserted] = choices.chosen.emplace(key, sets[timed.fastest]);  // another thread's may be first
  if (inserted) choices.report.push_back(line);
  return kept->second;
}

}  // namespace

std::vector<std::string> flash_tile_choices() {
  TileChoices& choices = tile_choices();
  const std::lock_guard<std::mutex> lock(choices.mutex);
  return choices.report;
}

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& qkv, int n_head, FlashTiles tiles) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  LaunchScope scope(qkv);
  if (qkv.dtype() == DType::F32) {  // the materialised fallback (see the top of the file)
    const Tensor att = probabilities_workspace(qkv, n_head);
    attention_forward(out, att, qkv, n_head);
    const int64_t rows = lse.numel();
    LAB_LAUNCH(lse_from_probabilities_kernel, {grid_for(rows, kWarpRowsPerBlock), kBlockSize, 0, scope.stream()},
               lse.data<float>(), att.data<float>(), qkv.data<float>(), rows, s);
    return;
  }
  // Every set writes the same out and lse: the timed runs may write them.
  const FlashTiles set = resolve_tiles(tiles, false, qkv, s, scope.stream(), [&](FlashTiles candidate) {
    forward_with(candidate, out, lse, qkv, s, scope.stream());
  });
  forward_with(set, out, lse, qkv, s, scope.stream());
}

void flash_attention_backward(const Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                              const Tensor& lse, int n_head, GradWrite dqkv_write, FlashBackward passes,
                              FlashTiles tiles) {
  if (qkv.dim(0) == 0 || qkv.dim(1) == 0 || qkv.dim(2) == 0) return;
  const Dims s = dims_of(qkv, n_head);
  LaunchScope scope(qkv);
  if (qkv.dtype() == DType::F32) {  // the materialised fallback: recompute the probabilities, then its backward
    const Tensor att = probabilities_workspace(qkv, n_head);
    const MemoryScope workspace(MemCategory::Workspace);
    attention_forward(Tensor::empty(out.shape(), DType::F32, out.device()), att, qkv, n_head);
    cuda::attention_backward(dqkv, dout, qkv, att, n_head, dqkv_write);  // not ops:: (found by GradWrite's namespace)
    return;
  }
  if (passes == FlashBackward::OnePass)
    return flash_attention_backward_one_pass(dqkv, dout, qkv, out, lse, n_head, dqkv_write);
  const bool add = dqkv_write == GradWrite::Add;
  // The timed runs overwrite: dqkv itself, which the chosen set then writes again, or a workspace where the call
  // adds into dqkv.
  Tensor timed_into;
  const FlashTiles set = resolve_tiles(tiles, true, qkv, s, scope.stream(), [&](FlashTiles candidate) {
    if (add && !timed_into.defined()) {
      const MemoryScope workspace(MemCategory::Workspace);
      timed_into = Tensor::empty(dqkv.shape(), dqkv.dtype(), dqkv.device());
    }
    backward_with(candidate, add ? timed_into : dqkv, dout, qkv, out, lse, s, scope.stream(), false);
  });
  backward_with(set, dqkv, dout, qkv, out, lse, s, scope.stream(), add);
}

}  // namespace lab::ops::cuda
