// Rung 2 of the memory staircase: activation recompute, `--recompute none|selective|selective-ln|block`.
//
// What changes from the previous rung (gradient accumulation): nothing about what is computed, only what the
// forward pass keeps for backward. Accumulation bounded the activations by the micro-batch; recompute trades
// compute for the activations themselves: some forward results are dropped after use and computed again,
// from what was kept, when backward needs them. The ops and their order are the same, so on the CPU the
// losses and gradients are bitwise those of no recompute (one exception below: selective-ln after chapter 6's
// fused residual + LayerNorm in fp32, to rounding).
//
//   none       every forward result stays on the tape until its backward has run.
//   selective  Megatron's choice (Korthikanti et al. 2022): the attention probabilities [B, heads, T, T] and
//              the GELU output [B, T, 4C] are dropped and recomputed; the GEMM outputs are kept. Those two are
//              the activations that are big but cheap to compute again (no GEMM: the scores grow with T^2, the
//              GELU is elementwise). Here the attention op computes probabilities and output together, so its
//              recompute also repeats the probabilities-times-values product. An attention other than the
//              core's (flash attention, chapter 9, keeps no probabilities) is left as installed.
//   selective-ln  selective, and the two LayerNorms' outputs [B, T, C] of every block too (llm.c's recompute=2):
//              each block keeps 10 C values a token instead of 12. The LayerNorm runs again in backward, from its
//              input (which its own backward keeps), just before the layer that reads its output: an elementwise
//              pass that reads C values a token and writes C per LayerNorm, no GEMM. After chapter 6's fused
//              residual + LayerNorm the core's LayerNorm recomputes the output from the sum: the fused op's bits
//              with 16-bit activations, to rounding in fp32 (its fp32 kernel is a loop of its own). Worth it when the
//              peak is the activations (the largest batch that fits); when memory is not short it costs a few percent
//              of step time for nothing.
//   block      only each block's input is kept; backward runs the block's forward again on a tape of its own
//              and then that tape's backward (torch.utils.checkpoint around every block). One extra forward
//              per step, about a third more compute, for activations of one block instead of all of them.
//
// The policies are ModelOptions settings, so the core model does not know them: selective installs the attention
// hook below and sets ModelOptions::recompute_gelu, which every MLP implementation honours (the core's through
// gelu_linear_recomputing_gelu, common/nn/modules.h; chapter 6's fused MLP by keeping its GEMM's aux output only);
// selective-ln sets ModelOptions::recompute_layernorm too, which the core's block and chapter 6's fused one honour;
// block wraps the block hook installed before it (chapter 6's fused block). All work in every precision: the
// probabilities are fp32 as the core attention's are, the GELU and LayerNorm outputs in the activations' dtype.
// The selective policies change the MLP, which a tensor-parallel shard cannot (Megatron's MLP needs its
// communication): they refuse tensor parallelism; block works with it.
#pragma once

#include <string>
#include <vector>

#include "common/nn/modules.h"

namespace lab::ch07 {

enum class RecomputePolicy { None, Selective, SelectiveLayerNorm, Block };

std::vector<RecomputePolicy> recompute_policies();                // every policy, in the order above
std::vector<std::string> recompute_policy_names();                // "none", "selective", "selective-ln", "block"
RecomputePolicy parse_recompute_policy(const std::string& name);  // InvalidArgument naming the choices
const char* recompute_policy_name(RecomputePolicy policy);
// selective and selective-ln: the policies that recompute the core attention's probabilities and the GELU output.
bool is_selective(RecomputePolicy policy);

// Installs the policy's hooks in `options` (None leaves them unchanged). InvalidArgument for selective and
// selective-ln on a tensor-parallel model (options.tensor_parallel set).
void apply_recompute(ModelOptions& options, RecomputePolicy policy);

// The hooks themselves.
// Attention that keeps qkv and its output but not the probabilities (fp32 inside, as ag::attention).
Var attention_recomputing_probabilities(Tape& tape, const Var& qkv, int n_head);
// The block, keeping only its input and output; backward re-runs its forward (with `options`' other hooks). The
// block computed is `recomputed` (a block hook installed before the policy, chapter 6's fused block), or the
// standard block when it is empty.
Var block_recomputed(Tape& tape, const Block& block, const Var& x, const ModelOptions& options,
                     const ModelOptions::BlockFn& recomputed = {});

}  // namespace lab::ch07
