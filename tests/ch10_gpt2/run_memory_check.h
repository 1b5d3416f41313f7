// Shared by test_run_memory_theory and its CUDA twin: one run built by build_run, its peaks by category over one
// training step beside run_memory_theory's.
#pragma once

#include <array>
#include <cstdint>

#include "ch07_memory/memory_theory.h"
#include "ch10_gpt2/run_config.h"

namespace lab::test {

inline constexpr int64_t kTheoryRows = 2, kTheorySeq = 16;

struct StepMemory {
  std::array<int64_t, kNumMemCategories> peak{};  // the allocator's, by category, over the second step
  ch07::MemoryTheory theory;                      // run_memory_theory(config, kTheoryRows, kTheorySeq)
  int64_t peak_of(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

// Builds `config` in one process, runs one step (whatever is allocated once is), resets the device's peaks and
// runs a second step of kTheoryRows x kTheorySeq tokens.
StepMemory measure_step_memory(const RunConfig& config);

// A tiny GPT-2 whose tied embedding is small beside its blocks, so that the gradients that the optimizer in
// backward frees are most of them.
RunConfig tiny_theory_run(Device device);

}  // namespace lab::test
