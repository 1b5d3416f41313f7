// The attention lab as data: causal self-attention, forward or backward, its versions side by side, each validated
// against the fp64 reference (attention_reference.h) and timed by the kernel lab harness (common/lab/kernel_lab.h).
// The lab executable (ch09_attention_lab) and the tests build it with the same function.
//
// The problem: qkv [B,T,3C] as GPT-2's c_attn writes it (q, k, v of NH heads of size HS side by side), causal;
// by default GPT-2 d12's attention at B = 8, T = 1024 (NH = 12, HS = 64).
//   forward:   out [B,T,C] (and what the backward needs: the probabilities, or the row log-sum-exp)
//   backward:  dqkv from dout, through that version's own saved forward
//
// Versions, CPU first, then the GPU ones (present when a CUDA device is visible):
//   v1  CPU reference     ops::cpu::attention: the T x T scores as one sgemm per head, softmax rows, a second
//                         sgemm; f32, B*NH*T^2 floats of probabilities kept for the backward
//   v2  CPU flash         ops::cpu::flash_attention: 64 x 64 tiles, online softmax, no T x T buffer; f32
//   v3  CUDA materialised ops::cuda::attention, the core's op before this chapter: strided-batched cuBLAS sgemms
//                         (strict fp32) and a softmax kernel over the T x T matrix in memory
//   v4  CUDA flash, WMMA  flash_wmma.cu: a block per 64-query tile streaming 64-key tiles through shared memory,
//                         bf16 (or f16) products on tensor cores through WMMA, f32 online softmax
//   v5  (backward only)   CUDA flash with dQ by atomics (flash_versions.h): v7's forward; the backward in one pass
//                         over key tiles adding dS K into an f32 dQ with atomicAdd, as FlashAttention-2 does
//   v6  CUDA flash, FA2   flash_registers.cu: v4's tiles with mma.sync and ldmatrix, fragments kept in registers
//   v7  CUDA flash        ops::cuda::flash_attention, the core's op: v6 with the next tile loaded by cp.async
//                         while this one is multiplied
//   v8  CUDA batched      ops::cuda::batched_attention, the --attention batched rung: v3's algorithm with 16-bit
//                         cuBLASLt products on tensor cores and one fused causal softmax, the probabilities kept
//                         in 16 bits (after the flash versions, so that their numbers keep their names)
//   v9  (backward only)   CUDA flash, one pass with dQ by atomics, fragments in registers: the core's op with
//                         ops::FlashBackward::OnePass (--attention flash-one-pass); v7's forward; v5's one pass on
//                         v7's kernels, each step's dS K by mma.sync added into f32 dQ
//   v10 (backward only)   CPU flash, one pass: the core's CPU op with FlashBackward::OnePass, one task per head
//                         walking its key tiles and summing dQ as it goes (v2's forward; v2's bits, fewer products)
//   v11 (forward only)    CUDA flash, 128-query tiles (the core's op with ops::FlashTiles::Rows128): v7's forward
//                         kernel with two strips of 16 queries a warp, each K/V fragment loaded from shared memory
//                         feeding both; head size 64 (128 keeps one strip); v7's bits; in the backward lab v7's
//                         backward
//   v12 (backward only)   CUDA flash, 128-row tiles in the backward (the core's op with FlashTiles::Rows128): v7's
//                         backward kernels with two strips of 16 rows a warp, each Q or dO fragment (dK, dV) or K
//                         or V fragment (dQ) loaded from shared memory feeding both; head size 64 (128 keeps one
//                         strip); v7's bits; v11's forward
//   v13 (backward only)   v12 with its dK/dV kernel in steps of 16 queries instead of 32 (FlashTiles::Rows128Steps16:
//                         244 registers a thread, not 255; the warp's K and V fragments read twice as often); v7's
//                         bits; v11's forward
// The GPU versions are left out (listed, neither validated nor timed) where no GPU is visible, so that every
// version keeps its number on every machine.
//
// How each is judged: the f32 versions against the fp64 reference of their inputs, within tolerance_for(f32,
// max(T, HS)); the 16-bit versions by the low-precision rule: its error against the fp64 reference of the rounded
// inputs within 4x the error of the straightforward same-precision computation (the reference with the
// probabilities and score gradients rounded to 16 bits, as a tensor-core product reads them). Outputs are NaN
// before each validation, and dqkv zero (the backward adds into it).
//
// Cost (the same for every version, so GB/s is effective bandwidth): FLOPs 4 B NH T^2 HS for the forward's two
// products, halved for causal; the backward 2.5x that (five products instead of two); bytes the compulsory
// traffic at 2 bytes an element (the 16-bit version's): forward qkv in, out out; backward qkv, out and dout in,
// dqkv read and written, plus the f32 row statistics.
#pragma once

#include <cstdint>

#include "ch09_advanced/kernels/01_attention/attention_reference.h"
#include "common/lab/kernel_lab.h"

namespace lab::ch09 {

struct AttentionProblem {
  AttentionShape shape{8, 1024, 12, 64};
  DType flash_dtype = DType::BF16;  // the CUDA flash version's inputs: bf16 or f16
  uint64_t seed = 1;
};

enum class LabPass { Forward, Backward };

kernel_lab::Cost attention_cost(const AttentionShape& shape, LabPass pass);

// Makes the inputs, the references, and adds the versions.
kernel_lab::KernelLab make_attention_lab(const AttentionProblem& problem, LabPass pass);

}  // namespace lab::ch09
