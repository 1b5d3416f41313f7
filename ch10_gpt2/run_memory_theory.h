// What theory says one rank of a run holds, by category, with every rung's share in one place: chapter 7's
// memory theory (ch07_memory/memory_theory.h) for the run's model, then what each rung changes in it, then the
// part of it that the rank's place in a tensor- and pipeline-parallel layout keeps.
//
//   rung                      its share
//   --dtype bf16|fp16         the matmuls' 16-bit copy of the parameters (2 bytes each, beside the fp32 ones)
//   --activations 16bit       the activations in 2 bytes (LayerNorm's statistics and the loss stay fp32)
//   --attention               what attention keeps per head and token (ch09_advanced/attention_choice.h)
//   --recompute               the activations a block keeps (and, for block, the one block recomputed)
//   --lm-head chunked         the head's input gradient [B, T, C] kept instead of the [B, T, Vp] logits
//   --optimizer-in-backward   the gradients: the tied embedding's alone ([padded vocabulary, C], alive through the
//                             whole backward), instead of the whole flat buffer
//   --offload optimizer       the optimizer state leaves the GPU (0 on a CUDA device; on the CPU it stays)
//   --zero 1|2|3              parameters, gradients and optimizer state as the stage shards them over the
//                             data-parallel ranks, plus what is whole beside the shards (zero/zero_theory.h)
//   --tp T                    the rank's tensor-parallel shard, as common/nn/shard.h cuts the model (below)
//   --pp P                    the rank's pipeline stage: its blocks, the embeddings on the first stage, the head
//                             on the last, and the micro-batches its schedule keeps in flight (below)
//
// Tensor parallelism (Megatron-LM's layout without sequence parallelism, ch08_distributed/tp). Per parameter:
//   split by T     c_attn's and c_fc's weights and biases (by rows: the rank's heads, its hidden units), both
//                  c_proj weights (by columns), wte (by rows: Vp_T / T of them, Vp_T the padded vocabulary
//                  padded further to a multiple of 128 T, GPT2Config::padded_vocab_for)
//   whole          ln_1, ln_2, ln_f, wpe and the c_proj biases (g adds them once, after its all-reduce)
// so a block holds 12 C^2 / T + 7 C / T + 6 C parameters. Gradients and AdamW's state follow the parameters: each
// rank's flat buffers are its shard's. Per token, a block keeps 12 C / T split elements (qkv 3C, the attention
// output C, c_fc's output 4C, the GELU 4C: its heads' and hidden units' share) and its H / T heads' attention
// rows, but 4 C whole ones: ln_1's and ln_2's outputs (each rank computes them whole, and f passes them on
// uncopied) and the two residuals; and the 4 LayerNorm statistics. A row-parallel layer's partial sum and the
// all-reduced sum are not kept (no backward reads them; the residual add consumes the sum). Outside the blocks the
// vocabulary-parallel embedding keeps the summed embedding alone, and the head the rank's Vp_T / T columns of the
// logits.
// Every tensor-parallel rank holds the same bytes (the slices are equal). --recompute selective and --kernels
// fused are refused with --tp, so a block keeps either all of the above or, under block recompute, its input.
//
// Pipeline parallelism (ch08_distributed/pp). Stage s of P holds blocks [s L / P, (s+1) L / P) (ModelShard); the
// first stage also wte and wpe, the last ln_f and its own copy of wte (the head is tied to it; each copy has
// its gradient and moments), one stage both. Per token and micro-batch, the first stage keeps the embedding's
// output, every other stage the boundary activation it receives (the input of its first block), the last stage
// ln_f's output with its statistics, the logits and the loss; a stage's output is its last block's residual,
// already counted. A stage holds the activations of the micro-batches whose forward has run and backward has not
// (one tape each, pp/stage.h): all M of them at GPipe's turn, min(P - s, M) under 1F1B.
//
// Under --tp or --pp the activations are fp32 (run_refusal refuses 16-bit ones there), the statistics' 4 bytes
// like every other element's. The parameters' flat buffer aligns each tensor to 32 elements
// (common/nn/parameters.h), which theory leaves out: every GPT-2 size's tensors, and their tp slices, are
// multiples of 32 elements.
//
// Theory is for micro-batches of `batch` x `seq` tokens on the rank at `rank` of config.parallel.layout: one
// micro-batch of the whole model in one process (accumulation frees each micro-batch's activations before the
// next), the rank's shard and the micro-batches its stage keeps in flight otherwise. The data-parallel coordinate
// changes nothing (ZeRO's shards are its formula's, the same on every rank). The trainer's --memory-report prints
// the theory of the rank that prints beside the allocator's figures; tests/ch10_gpt2/test_run_memory_theory.cpp
// holds each share to what the allocator counts, and test_run_memory_theory_mpi.cpp each tensor- and
// pipeline-parallel rank's.
#pragma once

#include <cstdint>
#include <string>

#include "ch07_memory/memory_theory.h"
#include "ch10_gpt2/run_config.h"
#include "common/comm/parallel_context.h"

namespace lab {

ch07::MemoryTheory run_memory_theory(const RunConfig& config, int64_t batch, int64_t seq,
                                     const comm::ParallelCoords& rank = {});

// The micro-batches whose activations pipeline stage `stage` holds at once: 1 without a pipeline, M for GPipe,
// min(P - stage, M) for 1F1B.
int64_t micro_batches_in_flight(const RunConfig& config, int stage);

// What run_memory_theory covers, for the memory report's header: "one micro-batch" in one process, else the
// rank's part and its micro-batches, e.g. "tp rank 0 of 2, stage 1 of 2 (blocks [1, 2), head), 1 micro-batch of
// 4 in flight (1f1b)".
std::string run_memory_theory_scope(const RunConfig& config, const comm::ParallelCoords& rank = {});

}  // namespace lab
