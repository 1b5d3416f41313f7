// What theory predicts a GPT-2 training step holds, by category, for the memory report to set beside what the
// allocator measured.
//
//   params      P x bytes, P the parameters with the padded vocabulary (the flat buffer holds its rows), + P x 2
//               under mixed precision with fp32 parameters: the 16-bit copy of the whole flat buffer that the
//               matmuls read (GPT2::set_matmul_dtype)
//   grads       P x bytes (one flat gradient buffer, alive all step)
//   optimizer   2 P x 4 (AdamW's two fp32 moments), + P x 4 for fp32 master weights when the parameters are
//               16-bit: 16 bytes per parameter in all, the ZeRO paper's 16 psi for mixed-precision Adam
//   activations what the forward pass keeps for backward, per token (B x T of them), in elements:
//                 per block   16 C + 4 + heads x T   (none)
//                             12 C + 4               (selective: no probabilities, no GELU output)
//                             10 C + 4               (selective-ln: nor the two LayerNorms' outputs)
//                             C                      (block: its input only)
//               of which attention's own share, per head and token, is its probabilities' row (T values of
//               the activations' bytes); chapter 9's rungs keep less or narrower: AttentionKept below
//                 outside     2 C + 3 + Vp           (embedding output, ln_f with its statistics, the logits
//                                                     that become their own gradient, the loss)
//                             2 C + 3                (--lm-head chunked: ln_f's output's gradient, computed in
//                                                     forward, instead of ln_f's output and the logits;
//                                                     chunked_lm_head.h)
//               Each element takes the activations' bytes (4 in fp32, 2 with 16-bit activations end to end),
//               except the statistics, always fp32: LayerNorm's mean and rstd (the 4 per block, 2 of the 3
//               outside) and the loss.
//               The per-block count of `none` is the kept tensors of one pre-LN block: ln_1 (C, mean and rstd),
//               qkv (3C), the probabilities (heads x T), the attention output (C), the residual (C), ln_2
//               (C + 2), c_fc (4C), GELU (4C) and the residual (C). The two projections' outputs are not kept:
//               the residual add consumes them and no backward reads them (Var::without_value). It is
//               Korthikanti et al.'s 34 + 5 a s / h bytes per token and hidden unit (16 C + heads x T elements
//               of 2 bytes without dropout masks). Backward adds, at its peak, the gradients in flight (a few [B,T,C]
//               and one [B,T,4C]) and, for block, one block's activations recomputed.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "ch07_memory/chunked_lm_head.h"
#include "ch07_memory/recompute.h"
#include "common/core/memory.h"
#include "common/nn/config.h"

namespace lab::ch07 {

// What attention keeps for backward, per head and token, beside qkv and its output (chapter 9's rungs).
enum class AttentionKept {
  Probabilities,      // the core's attention: a row of T probabilities in the activations' dtype
  F32Probabilities,   // the core's attention under 16-bit activations: it runs in fp32 on widened inputs, and
                      // keeps its row in 4 bytes a value
  HalfProbabilities,  // batched attention in 16 bits: the row in 2 bytes a value
  LogSumExp,          // flash attention: one f32 log-sum-exp (kept under selective recompute too)
};

struct MemoryTheory {
  std::array<int64_t, kNumMemCategories> bytes{};       // by MemCategory; 0 where theory says nothing
  int64_t parameters = 0;                               // P, padded vocabulary included
  int64_t activation_elements_per_token_per_block = 0;  // attention's share apart (next line)
  int64_t attention_bytes_per_token_per_block = 0;
  int64_t activation_elements_per_token_outside = 0;
  int64_t activation_bytes_per_token = 0;  // all of the above, in bytes, over every block and outside
  // Block recompute only: one block's activations, live again while its backward runs (not in `bytes`).
  int64_t recomputed_block_bytes = 0;

  int64_t of(MemCategory c) const { return bytes[static_cast<int>(c)]; }
  int64_t total() const;
};

// The theory for one micro-batch of B x T tokens, with `bytes_per_element` for parameters, gradients and
// activations (4 for fp32, 2 for bf16 with fp32 master weights), and what the model's attention keeps.
// `activation_bytes`, when not 0, sets the activations' bytes apart: 2 for 16-bit activations end to end
// (ModelOptions::activations) beside fp32 parameters, 4 for fp32 activations beside 16-bit ones.
// `matmul_copy_bytes`: the bytes per parameter of the matmuls' 16-bit copy (2 under bf16/fp16 mixed precision,
// 0 without one). `head`: whether the logits are kept (full) or the head's input gradient instead (chunked).
MemoryTheory memory_theory(const GPT2Config& config, int64_t batch, int64_t seq, RecomputePolicy policy,
                           int64_t bytes_per_element = 4, AttentionKept attention = AttentionKept::Probabilities,
                           int64_t activation_bytes = 0, int64_t matmul_copy_bytes = 0, LmHead head = LmHead::Full);

}  // namespace lab::ch07
