// Shared by test_run_memory_theory, its CUDA twin and its MPI twin: one run built by build_run, its peaks by
// category over one training step beside run_memory_theory's.
#pragma once

#include <array>
#include <cstdint>

#include "ch07_memory/memory_theory.h"
#include "ch10_gpt2/run_config.h"
#include "common/comm/parallel_context.h"

namespace lab::test {

inline constexpr int64_t kTheoryRows = 2, kTheorySeq = 16;

struct StepMemory {
  std::array<int64_t, kNumMemCategories> peak{};  // the allocator's, by category, over the second step
  ch07::MemoryTheory theory;                      // run_memory_theory(config, kTheoryRows, kTheorySeq, its rank)
  int64_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

// Builds `config` in one process, runs one step (whatever is allocated once is), resets the device's peaks and
// runs a second step of kTheoryRows x kTheorySeq tokens (a micro-batch: every micro-batch of a step is the same).
StepMemory measure_step_memory(const RunConfig& config);
// The same on this rank of `context` (collective over its groups), beside the theory of this rank.
StepMemory measure_step_memory(const RunConfig& config, const comm::ParallelContext& context);

// The activations that one micro-batch of kTheoryRows x kTheorySeq tokens leaves stored on this rank of `context`
// after its forward, as a pipeline stage holds them until its backward: the rank's part of the forward on a tape
// (the first stage embeds the tokens, every other stage takes a boundary activation as it receives one, the last
// computes the loss), the tape and what the stage keeps alive. Collective over the tensor-parallel group.
int64_t stored_activations_of_one_micro_batch(const RunConfig& config, const comm::ParallelContext& context);

// A tiny GPT-2 whose tied embedding is small beside its blocks, so that the gradients that the optimizer in
// backward frees are most of them.
RunConfig tiny_theory_run(Device device);

}  // namespace lab::test
