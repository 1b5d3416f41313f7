// The ZeRO staircase of chapter 7: data parallelism, then ZeRO stages 1, 2 and 3 (zero/zero_step.h), each one
// setting of gpt2_train (--zero) away from the rung below, run together by the D ranks of a data-parallel group
// (ch07_memory_bench runs it under `mpirun -np D`, D >= 2).
//
//   rung   --zero  sharded over the D ranks           params + grads + optimizer per rank, fp32 AdamW
//   dp     0       nothing (ch08's bucketed step)     4Ψ + 4Ψ + 8Ψ      = 16Ψ
//   zero1  1       AdamW's moments                    4Ψ + 4Ψ + 8Ψ/D    = 8Ψ + 8Ψ/D
//   zero2  2       moments and gradients              4Ψ + 4Ψ/D + 8Ψ/D  = 4Ψ + 12Ψ/D
//   zero3  3       moments, gradients, parameters     16Ψ/D
//   zero3-prefetch  the same, the next block gathered while the current one computes (one more block whole)
//
// (Ψ: the elements of the model's flat parameter buffer.) The workload is the memory staircase's accumulation
// rung spread over the ranks: the same global batch of `batch` rows per step, each rank training on its own
// batch/D rows of it in micro-batches of batch/micro_batches rows (so each rank accumulates micro_batches/D of
// them), without recompute: ZeRO divides the model state, which is what these rungs compare, and the
// activations of one micro-batch are then the accumulation rung's, to be read beside it.
//
// Each rung's measurements are measure_steps()' (memory_staircase.h): this rank's peaks by category (every
// rank's are equal up to the padding of the last shards), the largest peak over the ranks, the slowest rank's
// step time, and "state_MiB", the peaks of parameters, gradients and optimizer state added up (this rank's).
//
// Where the measurement exceeds the formula, and by how much in theory (zero/zero_theory.h): ZeRO-2 and 3 hold
// the gradients in flight whole beside the shard (the bucket being filled; at the end of backward the
// embeddings', which the lookup adds into at once: wte's [vocabulary, C] is a bucket of its own, its LM head
// contribution reduced alone as soon as it is made); stage 3 also holds the unit in use gathered (wte with wpe
// for the lookup, or a block) and, with prefetch, the unit gathered ahead. The smaller wte's share of Ψ (d12:
// about a third; the named tiny and small: nearly all), the closer the stages come to the formula.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ch07_memory/memory_staircase.h"
#include "ch07_memory/zero/zero_theory.h"
#include "common/comm/communicator.h"

namespace lab::ch07 {

struct ZeroBenchConfig {
  MemoryBenchConfig memory;  // model, global batch, seq, micro-batches, timed steps, device
  double bucket_mb = 25;     // the data-parallel buckets, which ZeRO's shards follow (ch07 zero/shards.h)
  // The model when it is none of the named ones (memory.model then only names it in the description): a test's
  // model whose tied embedding is small beside its blocks.
  std::optional<GPT2Config> model_config;
};

// The rungs for `ranks` data-parallel ranks. InvalidArgument unless the global batch splits into micro-batches
// of batch/micro_batches rows over the ranks.
staircase::Staircase zero_staircase(const ZeroBenchConfig& config, int ranks);

struct ZeroStaircaseReport {
  staircase::StaircaseReport report;
  int64_t parameters = 0;               // Ψ of the rungs' model
  std::vector<ZeroStateTheory> theory;  // per rung: the stage's formula and what is whole beside the shards
};

// Runs every rung on `group`'s ranks (collective: every rank calls it with the same config), calling `on_rung`
// after each. A rung whose step refuses to be built (alike on every rank) is reported as not run, with the
// reason.
ZeroStaircaseReport run_zero_staircase(comm::Communicator& group, const ZeroBenchConfig& config,
                                       const std::function<void(const staircase::RungReport&)>& on_rung = {});

}  // namespace lab::ch07
