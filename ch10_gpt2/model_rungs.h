// The model's rungs: the flags that change which functions a GPT-2 runs, not its weights or its step.
//
//   --kernels reference|fused           chapter 6: fused residual + LayerNorm, GEMM + bias + GELU, classifier
//   --attention materialized|batched|flash   chapter 9: 16-bit materialised attention; flash attention, one
//                                       log-sum-exp per row kept
//   --recompute none|selective|block    chapter 7: activations dropped in forward and computed again in backward
//   --lm-head full|chunked              chapter 7: the LM head and its loss chunk by chunk in forward, no logits kept
//   --lm-head-rows N                    the chunked head's rows per chunk (0: ch07::lm_head_chunk_rows)
//   --activations fp32|16bit            chapter 6's mixed precision taken end to end: the activations between the
//                                       ops in the --dtype's 16-bit type (ModelOptions::activations), not fp32
//
// Each rung installs ModelOptions hooks (common/nn/modules.h). They compose in one order, the one `apply` uses:
// kernels first (they replace the block, the MLP and the classifier), then the attention, then recompute, which
// wraps what is installed (block recompute recomputes the fused block; selective recompute leaves flash
// attention, which keeps no probabilities to drop, and has whichever MLP is installed drop its GELU output), then
// the head, which runs whichever classifier is installed chunk by chunk. The pairs that cannot compose are declared
// here once, each with the line a user sees, and a test runs every other combination against the plain model
// (tests/ch10_gpt2/ test_model_rungs.cpp). The trainer and gpt2_step_bench build their models through this.
#pragma once

#include <string>
#include <vector>

#include "ch06_single_gpu/fused_model.h"
#include "ch07_memory/chunked_lm_head.h"
#include "ch07_memory/recompute.h"
#include "ch09_advanced/attention_choice.h"

namespace lab {

struct ModelRungs {
  ch06::Kernels kernels = ch06::Kernels::Reference;
  ch09::Attention attention = ch09::Attention::Materialized;
  ch07::RecomputePolicy recompute = ch07::RecomputePolicy::None;
  bool activations_16bit = false;
  ch07::LmHead lm_head = ch07::LmHead::Full;
  int64_t lm_head_rows = 0;  // the chunked head's rows per chunk; 0: its default

  // From the flags' values; Error(InvalidArgument) naming the choices of a bad one, or rows without the chunked
  // head.
  static ModelRungs parse(const std::string& kernels, const std::string& attention, const std::string& recompute,
                          const std::string& activations = "fp32", const std::string& lm_head = "full",
                          int64_t lm_head_rows = 0);

  // Why these rungs cannot run together, as the one-line error a user sees; empty when they can. (What a rung
  // cannot do on a tensor-parallel shard, its own chapter refuses when it is installed.)
  std::string incompatibility() const;

  // incompatibility(), or, when the rungs compose, why they cannot run with `matmul` products (16-bit activations
  // with f32 ones); empty when they can.
  std::string refusal(DType matmul) const;

  // Installs the rungs in `options`, flash attention in `matmul` storage (and 16-bit activations in it);
  // Error(InvalidArgument) with refusal()'s line when they cannot.
  void apply(ModelOptions& options, DType matmul) const;

  // "--kernels fused --attention flash --recompute block" (and " --activations 16bit", " --lm-head chunked",
  // " --lm-head-rows N" when set)
  std::string str() const;
};

std::vector<std::string> activations_names();  // "fp32", "16bit"

// Every combination of the rungs' values, compatible or not, with fp32 activations; the chunked head in its
// default chunks with the reference kernels and in chunks of 7 rows with the fused ones.
std::vector<ModelRungs> every_model_rungs();

}  // namespace lab
