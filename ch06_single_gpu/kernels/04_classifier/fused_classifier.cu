// CUDA path of ch06_single_gpu/fused_classifier.h: the classifier lab's v6 (rows that fit half an SM's shared memory)
// and v5 (wider rows), promoted into lab_ch06.
//
// Both read the logits in their own dtype (f32, bf16 or f16; fp32 arithmetic) as 16-byte pieces (Piece<D>: 4 f32 or
// 8 16-bit logits), one block per row (one warp for a row of at most 32 pieces), and make two passes:
//   1. each thread loads its part of the row and gathers the maximum and the sum of exp(x - max) of its elements at
//      once (the online softmax, online_softmax.cuh); one block reduction combines the threads' pairs;
//   2. the gradient dloss * (exp(x - max) / sum - onehot) is written over the logits, zeros over the padding.
// Neither reads the row twice from memory: each thread keeps the pieces it loaded on chip between the passes.
//
// v5, in registers: 1024 threads, each keeping its first kKeptPieces pieces in registers. 1024 x 8 pieces of 16 bytes
// hold a row of up to 65536 16-bit logits (GPT-2's 50304 take 6.1 pieces a thread), so a 16-bit row crosses memory
// once each way, the floor of 4 bytes a logit. An f32 row of GPT-2's width (12576 pieces) keeps two thirds of itself
// and reads the rest again, mostly from L2. The kept row fills the SM's registers: one block, one row, per SM, so the
// SM's loads stop while its block reduces, computes its exponentials and stores (on an H200 the bf16 logits of a
// d12 step at B = 8 moved 1.6 TB/s, a third of the HBM's 4.8 TB/s).
// v6, in shared memory: 512 threads, each storing the pieces it loads into the block's shared memory and reading
// back the same pieces for the gradient (its own: no barrier is needed between the passes but the reduction's).
// A row of up to kSharedRowBytes (GPT-2's bf16 row is 100.6 KB) leaves room for two blocks per SM, in the 228 KiB
// of an H100 or H200 SM, at 2 x 512 threads: while one block reduces and stores, the other's loads are in flight.
// Wider rows (f32 GPT-2's 201 KB) take v5.
//
// A piece may straddle the end of the real vocabulary: its elements past `vocab` are left out of the maximum and
// the sum and written as zero. Rows that do not split into pieces (Vp not a whole number of them, or a base that
// is not 16-byte aligned) take the core's kernel (common/ops/cuda/classifier.cu), which has the same contract.
//
// Targets are not checked here (that would cost a host synchronisation per call): a target outside [0, vocab)
// gives a NaN loss and a NaN gradient row; nothing is read or written out of bounds.
#include <math_constants.h>

#include <cstdint>
#include <limits>

#include "ch06_single_gpu/fused_classifier.h"
#include "ch06_single_gpu/kernels/04_classifier/online_softmax.cuh"
#include "common/ops/classifier.h"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/dispatch.h"

namespace lab::ch06::cuda {

namespace {

using ops::cuda::device_data;
using ops::cuda::DeviceType;
using ops::cuda::grid_for;
using ops::cuda::LaunchScope;
using ops::cuda::load;
using ops::cuda::Piece;
using ops::cuda::pieces_of;
using ops::cuda::store_as;

constexpr int kThreads = 1024;
// Pieces a thread keeps in registers between the passes: 8 x 16 bytes = 32 registers.
constexpr int kKeptPieces = 8;

// ---------------------------------------------------------------- per piece

// Adds the piece's elements that lie in the real vocabulary (its first `real` ones) to the thread's pair.
template <typename D>
__device__ void add_piece(MaxSum& s, const Piece<D>& piece, int real) {
  constexpr int kPer = Piece<D>::kElements;
  float x[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) x[j] = load(piece.e[j]);
  add_to_max_sum<kPer>(s, x, real);
}

// The gradient of the piece that starts at column `first`, written in place of its logits.
template <typename D>
__device__ void gradient_piece(Piece<D>& piece, int first, int vocab, int target, bool valid, float max, float scale,
                               float dloss) {
#pragma unroll
  for (int j = 0; j < Piece<D>::kElements; ++j) {
    const int v = first + j;
    float grad = 0.0f;
    if (v < vocab) grad = valid ? expf(load(piece.e[j]) - max) * scale - (v == target ? dloss : 0.0f) : CUDART_NAN_F;
    piece.e[j] = store_as<D>(grad);
  }
}

// Marks the kept pieces' bits as changed, so that the gradient pass widens them again from the 16 bytes a piece
// in registers (4 registers) instead of the compiler holding both passes' widened floats (8 registers a 16-bit
// piece), which spilled the bf16 kernel at 64 registers a thread (ptxas -v, sm_90).
template <typename D>
__device__ void keep_packed(Piece<D> (&kept)[kKeptPieces]) {
#ifdef __CUDA_ARCH__
#pragma unroll
  for (int i = 0; i < kKeptPieces; ++i) {
    uint32_t words[4];
    memcpy(words, &kept[i], sizeof(words));
#pragma unroll
    for (uint32_t& w : words) asm volatile("" : "+r"(w));
    memcpy(&kept[i], words, sizeof(words));
  }
#else
  (void)kept;
#endif
}

// ---------------------------------------------------------------- a block's row

// Row blockIdx.x of the logits, as v6's kernel sees it before its passes (v5's classify_row spells it out).
template <typename D>
struct BlockRow {
  Piece<D>* row;
  int pieces, target;
  bool valid;          // the target lies in [0, vocab)
  float target_logit;  // read before any thread overwrites the row (the block reduction is a barrier between)
};

template <typename D>
__device__ BlockRow<D> block_row(D* logits, const int32_t* targets, int Vp, int vocab) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * Vp;
  const int target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;
  return {reinterpret_cast<Piece<D>*>(logits + first), Vp / Piece<D>::kElements, target, valid,
          valid ? load(logits[first + target]) : 0.0f};
}

// Thread 0 writes the row's loss from the block's (max, sum); true when the gradient pass follows, with `dloss`
// times the scale the training step keeps on the device (ops::GradScale), if any.
template <typename D>
__device__ bool write_loss(float* losses, const BlockRow<D>& r, const MaxSum& s, float& dloss,
                           const float* dloss_factor) {
  if (threadIdx.x == 0) losses[blockIdx.x] = r.valid ? logf(s.sum) + s.max - r.target_logit : CUDART_NAN_F;
  if (dloss == 0.0f) return false;
  if (dloss_factor) dloss *= *dloss_factor;
  return true;
}

// ---------------------------------------------------------------- kernels

// One row, by the kThreads threads of the block (a compile-time stride: with blockDim.x instead, ptxas kept
// the kept pieces' indices in registers and spilled the 16-bit kernels).
template <typename D, int kThreads>
__device__ void classify_row(MaxSum* scratch, D* logits, float* losses, const int32_t* targets, int Vp, int vocab,
                             float dloss, const float* dloss_factor) {
  constexpr int kPer = Piece<D>::kElements;
  // block_row and write_loss spelled out: through them ptxas gave this kernel 64 registers a thread instead of 62
  // (63 instead of 56 in f32), the most 1024 threads may have.
  Piece<D>* row = reinterpret_cast<Piece<D>*>(logits + static_cast<int64_t>(blockIdx.x) * Vp);
  const int pieces = Vp / kPer;
  const int target = targets[blockIdx.x];
  const bool valid = target >= 0 && target < vocab;
  // Read before any thread overwrites the row: the block reduction below is a barrier between the two.
  const float target_logit = valid ? load(logits[static_cast<int64_t>(blockIdx.x) * Vp + target]) : 0.0f;

  MaxSum s = empty_max_sum();
  Piece<D> kept[kKeptPieces];
#pragma unroll
  for (int i = 0; i < kKeptPieces; ++i) {
    const int p = static_cast<int>(threadIdx.x) + i * kThreads;
    if (p < pieces) {
      kept[i] = row[p];
      add_piece(s, kept[i], vocab - p * kPer);
    }
  }
  for (int p = static_cast<int>(threadIdx.x) + kKeptPieces * kThreads; p < pieces; p += kThreads)
    add_piece(s, row[p], vocab - p * kPer);
  s = block_reduce_max_sum(s, scratch);
  keep_packed(kept);

  if (threadIdx.x == 0) losses[blockIdx.x] = valid ? logf(s.sum) + s.max - target_logit : CUDART_NAN_F;
  if (dloss == 0.0f) return;
  if (dloss_factor) dloss *= *dloss_factor;  // a scale the training step keeps on the device (ops::GradScale)
  const float scale = dloss / s.sum;
#pragma unroll
  for (int i = 0; i < kKeptPieces; ++i) {
    const int p = static_cast<int>(threadIdx.x) + i * kThreads;
    if (p < pieces) {
      gradient_piece(kept[i], p * kPer, vocab, target, valid, s.max, scale, dloss);
      row[p] = kept[i];
    }
  }
  for (int p = static_cast<int>(threadIdx.x) + kKeptPieces * kThreads; p < pieces; p += kThreads) {
    Piece<D> piece = row[p];
    gradient_piece(piece, p * kPer, vocab, target, valid, s.max, scale, dloss);
    row[p] = piece;
  }
}

template <typename D>
__global__ void __launch_bounds__(kThreads)
    fused_classifier_pieces_kernel(D* logits, float* losses, const int32_t* targets, int Vp, int vocab, float dloss,
                                   const float* dloss_factor) {
  __shared__ MaxSum scratch[ops::cuda::kWarpSize];
  classify_row<D, kThreads>(scratch, logits, losses, targets, Vp, vocab, dloss, dloss_factor);
}

// v6: one row by kSharedThreads threads, its pieces kept in dynamic shared memory (see the top of the file).
constexpr int kSharedThreads = 512;
// The widest row v6 takes: two blocks, each with this much, the runtime's 1 KiB and the reduction's scratch, fit
// the 228 KiB (233472 bytes) of an sm_90 SM: 2 x (114688 + 1024 + 256) = 231936.
constexpr int kSharedRowBytes = 112 * 1024;
// Pieces a thread loads before it folds them into its pair: 4 x 16 bytes in flight a thread, 64 KiB an SM.
constexpr int kLoadBatch = 4;

template <typename D>
__global__ void __launch_bounds__(kSharedThreads, 2)
    fused_classifier_shared_row_kernel(D* logits, float* losses, const int32_t* targets, int Vp, int vocab, float dloss,
                                       const float* dloss_factor) {
  constexpr int kPer = Piece<D>::kElements;
  LAB_DYNAMIC_SHARED(Piece<D>, kept);  // the row's pieces, 16-byte aligned
  __shared__ MaxSum scratch[ops::cuda::kWarpSize];
  const BlockRow<D> r = block_row(logits, targets, Vp, vocab);
  Piece<D>* const row = r.row;
  const int pieces = r.pieces, target = r.target;
  const bool valid = r.valid;

  MaxSum s = empty_max_sum();
  for (int first = static_cast<int>(threadIdx.x); first < pieces; first += kLoadBatch * kSharedThreads) {
    Piece<D> batch[kLoadBatch];
#pragma unroll
    for (int i = 0; i < kLoadBatch; ++i) {
      const int p = first + i * kSharedThreads;
      if (p < pieces) batch[i] = row[p];
    }
#pragma unroll
    for (int i = 0; i < kLoadBatch; ++i) {
      const int p = first + i * kSharedThreads;
      if (p < pieces) {
        kept[p] = batch[i];
        add_piece(s, batch[i], vocab - p * kPer);
      }
    }
  }
  s = block_reduce_max_sum(s, scratch);

  if (!write_loss(losses, r, s, dloss, dloss_factor)) return;
  const float scale = dloss / s.sum;
  for (int p = static_cast<int>(threadIdx.x); p < pieces; p += kSharedThreads) {
    Piece<D> piece = kept[p];  // this thread's own store above
    gradient_piece(piece, p * kPer, vocab, target, valid, s.max, scale, dloss);
    row[p] = piece;
  }
}

// A row of at most 32 pieces (a small vocabulary: a character-level model, the tests' tiny GPT-2) takes one warp:
// of 1024 threads, 31 warps would have nothing to load and would still join the block reduction.
template <typename D>
__global__ void __launch_bounds__(ops::cuda::kWarpSize)
    fused_classifier_warp_kernel(D* logits, float* losses, const int32_t* targets, int Vp, int vocab, float dloss,
                                 const float* dloss_factor) {
  __shared__ MaxSum scratch[ops::cuda::kWarpSize];
  classify_row<D, ops::cuda::kWarpSize>(scratch, logits, losses, targets, Vp, vocab, dloss, dloss_factor);
}

// ---------------------------------------------------------------- launchers

// v6 for rows of at most kSharedRowBytes and v5 for wider ones, or v5 for every row with `registers_only`; the warp
// kernel for rows of at most 32 pieces and the core's kernel for rows not in pieces either way.
void classify(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
              const ops::GradScale& dloss, bool registers_only) {
  const int64_t N = logits.dim(0), Vp = logits.dim(1);
  if (N == 0) return;
  ops::dispatch_float_dtype(logits.dtype(), "fused_classifier", [&](auto tag) {
    using S = typename decltype(tag)::type;
    using D = typename DeviceType<S>::type;
    // Rows not in whole 16-byte pieces, or too long for the kernel's int column indices: the core's kernel.
    if (pieces_of<D>(Vp, device_data<S>(logits)) == 0 || Vp > std::numeric_limits<int>::max()) {
      ops::cuda::fused_classifier(logits, losses, targets, vocab, dloss);
      return;
    }
    LaunchScope scope(logits);
    D* const data = device_data<S>(logits);
    float* const row_losses = losses.data<float>();
    const int32_t* const row_targets = targets.data<int32_t>();
    const int width = static_cast<int>(Vp), real = static_cast<int>(vocab);
    const int64_t row_bytes = Vp * static_cast<int64_t>(sizeof(D));
    if (Vp / Piece<D>::kElements <= ops::cuda::kWarpSize) {
      LAB_LAUNCH(fused_classifier_warp_kernel<D>, {grid_for(N, 1), ops::cuda::kWarpSize, 0, scope.stream()}, data,
                 row_losses, row_targets, width, real, dloss.value, dloss.device_pointer());
    } else if (!registers_only && row_bytes <= kSharedRowBytes) {
      const void* kernel = reinterpret_cast<const void*>(&fused_classifier_shared_row_kernel<D>);
      CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(row_bytes)));
      // All of the SM's unified memory as shared memory: two rows need 2 x (row_bytes + 1 KiB), more than the
      // carveout the driver might otherwise pick for one block.
      CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
      LAB_LAUNCH(fused_classifier_shared_row_kernel<D>,
                 {grid_for(N, 1), kSharedThreads, static_cast<size_t>(row_bytes), scope.stream()}, data, row_losses,
                 row_targets, width, real, dloss.value, dloss.device_pointer());
    } else {
      LAB_LAUNCH(fused_classifier_pieces_kernel<D>, {grid_for(N, 1), kThreads, 0, scope.stream()}, data, row_losses,
                 row_targets, width, real, dloss.value, dloss.device_pointer());
    }
  });
}

}  // namespace

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const ops::GradScale& dloss) {
  classify(logits, losses, targets, vocab, dloss, false);
}

void fused_classifier_registers(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                                const ops::GradScale& dloss) {
  classify(logits, losses, targets, vocab, dloss, true);
}

}  // namespace lab::ch06::cuda
