// --attention materialized|batched|flash|flash-one-pass|flash-tuned: which attention a GPT-2 runs. Chapter 9's rungs on
// top of chapter 6's.
//
//   materialized  the core's attention (common/ops/attention.h): the scores and probabilities [B, heads, T, T]
//                 are written to memory, and the probabilities stay on the tape for backward. The reference.
//   batched       the same algorithm in the run's matmul storage (common/ops/batched_attention.h,
//                 ag::batched_attention): under bf16/fp16 the four products of attention are 16-bit cuBLASLt
//                 matmuls on tensor cores instead of fp32 GEMMs on CUDA cores, softmax is one fused kernel each
//                 way, and the probabilities are kept in 16 bits (half the bytes). Still T^2 memory. The quick
//                 win; under fp32 or tf32 it is the materialised path itself.
//   flash         flash attention (common/ops/flash_attention.h, ag::flash_attention): the same function
//                 computed tile by tile with an online softmax; the tape keeps one log-sum-exp per row instead of
//                 the probabilities, and backward recomputes them. What changes from the previous rung: attention's
//                 activation memory grows as T instead of T^2 (at d12, B=8, T=1024 the probabilities are 4.8 GB
//                 in fp32 over the 12 layers; the log-sum-exps 4.7 MB), and on a GPU in bf16/fp16 the products run
//                 on tensor cores instead of as fp32 GEMMs.
//   flash-one-pass  flash attention whose backward sums dQ in the same pass over the key tiles as dK and dV
//                 (ops::FlashBackward::OnePass), FlashAttention-2's way: 5 tile products per pair of tiles instead
//                 of 7. What changes from flash: on a GPU the key tiles' blocks add dQ into an f32 [B, T, C]
//                 workspace with atomics (alive for the layer's backward: 4 bytes per element of dQ), so its last
//                 bits vary from run to run; on the CPU one task per head sums it in order, with the same bits as
//                 flash. When not to use it: where runs must repeat bit for bit on a GPU (a resumed run's losses
//                 then match the uninterrupted run's only to rounding), and wherever chapter 9's attention lab,
//                 or the step bench beside flash, finds it slower on the GPU at hand.
//   flash-tuned   flash attention whose CUDA kernels are the fastest of its three kernel sets on the GPU at hand
//                 (ops::FlashTiles::Timed): 64-row tiles (the lab's v7, flash's), 128-row tiles with two strips of
//                 16 rows a warp (v11 forward, v12 backward) and those with the dK/dV kernel in steps of 16 queries
//                 (v13), each timed at its shape's first call, forward and backward apart. What changes from flash:
//                 which kernels run, not a bit of the results (every set gives v7's bits: tested); the first step
//                 times the sets (a few runs of each layer shape's attention, one host synchronisation each), and
//                 `ops::flash_tile_choices` says what it chose. Where it chooses: bf16/fp16 heads of at most 64 on
//                 a GPU; on the CPU, and for heads of 128 (one set), it is flash itself. When not to use it: where a
//                 run must launch the same kernels every time (the choice follows timings, which vary), or when its
//                 first step must not synchronise; and under CUDA graphs a shape first seen during capture runs
//                 flash's kernels (the graphed step's eager first step times them first). A profile of the first
//                 step (`--profile 1`) counts the timed runs among its launches.
//
// The storage flash attention runs in is the run's matmul precision: bf16 or fp16 under mixed precision (qkv
// rounded for the call, as the 16-bit linears round their inputs), fp32 otherwise. When not to use it: an fp32
// or tf32 run on a GPU, where flash attention has no fp32 tensor-core kernel and the op runs the materialised
// kernels inside (no saving, so `attention_note` says so); and on a CPU at short sequences, where the probabilities
// are small and the tiled loops are no faster. Results are the materialised path's to rounding (not bitwise:
// the online softmax sums in another order).
//
// The flash choices share everything but the backward's dQ and which kernels compute it; below, "flash" means any.
//
// With --recompute selective (chapter 7), which recomputes the materialised probabilities, flash attention is
// kept as it is: it stores no probabilities to drop. Install the attention before the recompute policy.
#pragma once

#include <string>
#include <vector>

#include "ch07_memory/memory_theory.h"
#include "common/core/device.h"
#include "common/nn/modules.h"

namespace lab::ch09 {

enum class Attention { Materialized, Batched, Flash, FlashOnePass, FlashTuned };

std::vector<std::string> attention_names();  // "materialized", "batched", "flash", "flash-one-pass", "flash-tuned"
Attention parse_attention(const std::string& name);  // InvalidArgument naming the choices
const char* attention_name(Attention attention);

// Flash, FlashOnePass or FlashTuned.
bool is_flash(Attention attention);

// Sets options.attention for `attention`, flash attention running in `storage` (the matmul dtype: f32, bf16 or
// f16). Materialized leaves the core's attention.
void use_attention(ModelOptions& options, Attention attention, DType storage);

// What the choice keeps for backward per head and token, for chapter 7's memory theory, with the activations
// in `activations` (ModelOptions::activations).
ch07::AttentionKept attention_kept(Attention attention, DType storage, DType activations = DType::F32);

// One line for the user when the choice will not do what its name promises on `device` in `storage` (flash in
// f32 on a GPU runs the materialised kernels inside; batched in f32 is the materialised attention; flash-tuned on
// the CPU is flash), or when its results will not repeat bit for bit (flash-one-pass's atomics on a GPU); empty
// otherwise.
std::string attention_note(Attention attention, Device device, DType storage);

}  // namespace lab::ch09
