// The CPU allocator: 64-byte aligned blocks, cached by size class, with per-category accounting.
//
// Why cache on the CPU at all: a training step frees and re-allocates the same activation buffers every
// step. Large blocks from malloc come straight from mmap, so each step would page-fault and zero them
// again (tens of milliseconds for GPT-2's logits). Reusing blocks makes the steady state allocation-free.
// Small sizes are rounded up to quarter-powers of two (at most 25% slack), large ones to whole MiBs, and the
// cache is emptied whenever it grows past a cap (LAB_CPU_CACHE_MB, default 1024), so a workload of
// ever-changing shapes stays bounded. Live bytes count what was requested; reserved bytes what is held.
#pragma once

#include "common/core/memory.h"

namespace lab {

Allocator& cpu_allocator();

// The size class a request of `bytes` is rounded up to (exposed for tests).
size_t cpu_size_class(size_t bytes);

}  // namespace lab
