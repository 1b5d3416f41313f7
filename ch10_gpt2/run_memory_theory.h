// What theory says one rank of a run holds, by category, with every rung's share in one place: chapter 7's
// memory theory (ch07_memory/memory_theory.h) for the run's model, then what each rung changes in it.
//
//   rung                      its share
//   --dtype bf16|fp16         the matmuls' 16-bit copy of the parameters (2 bytes each, beside the fp32 ones)
//   --activations 16bit       the activations in 2 bytes (LayerNorm's statistics and the loss stay fp32)
//   --attention               what attention keeps per head and token (ch09_advanced/attention_choice.h)
//   --recompute               the activations a block keeps (and, for block, the one block recomputed)
//   --optimizer-in-backward   the gradients: the tied embedding's alone ([padded vocabulary, C], alive through the
//                             whole backward), instead of the whole flat buffer
//   --offload optimizer       the optimizer state leaves the GPU (0 on a CUDA device; on the CPU it stays)
//   --zero 1|2|3              parameters, gradients and optimizer state as the stage shards them over the
//                             data-parallel ranks, plus what is whole beside the shards (zero/zero_theory.h)
//
// Theory is for one micro-batch of `batch` x `seq` tokens on one rank and the whole model: a tensor- or
// pipeline-parallel shard is not modelled (its ranks hold less). The trainer's --memory-report prints it beside
// the allocator's figures; tests/ch10_gpt2/test_run_memory_theory.cpp holds each share to what the allocator
// counts.
#pragma once

#include <cstdint>

#include "ch07_memory/memory_theory.h"
#include "ch10_gpt2/run_config.h"

namespace lab {

ch07::MemoryTheory run_memory_theory(const RunConfig& config, int64_t batch, int64_t seq);

}  // namespace lab
