// The memory report (`gpt2_train --memory-report`, printed after the first step): live and peak bytes by
// category as the allocator counted them, beside what theory predicts (memory_theory.h), and the account of
// the process's resident memory against the allocator's figures:
//
//   allocator live peak      the tensors (what the categories add up to at their joint maximum)
//   + cache and rounding     reserved - live: freed blocks kept for reuse, requests rounded to size classes
//   = allocator reserved     what the allocator holds from the system at its peak
//   + outside the allocator  resident - reserved: code, libraries, thread stacks, BLAS buffers, the heap
//   = process peak resident  VmHWM of /proc/self/status (CPU runs; a GPU's memory is not resident memory)
#pragma once

#include <cstdint>
#include <string>

#include "ch07_memory/memory_theory.h"
#include "common/core/memory.h"
#include "common/util/json.h"

namespace lab::ch07 {

// Resident memory of this process from /proc/self/status (0 where it cannot be read).
struct ProcessMemory {
  int64_t resident = 0;       // VmRSS
  int64_t peak_resident = 0;  // VmHWM
};
ProcessMemory process_memory();

// The report's text. `process` is left out (all zero) for a GPU's allocator.
std::string memory_report(const MemoryStats& stats, const MemoryTheory& theory, const ProcessMemory& process);

// {"params": bytes, "grads", "optimizer", "activations", "workspace", "comm", "other"}: each category's peak.
Json peak_by_category_json(const MemoryStats& stats);

}  // namespace lab::ch07
