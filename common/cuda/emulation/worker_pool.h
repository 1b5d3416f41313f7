// The OS threads that run the blocks of a grid and the tiles of a GEMM: LAB_EMU_WORKERS threads in all,
// the caller being one of them, so a grid of one block runs without any hand-over between threads.
//
// Several streams may run grids at the same time; their jobs share the helper threads. Each OS thread runs
// one index (one block) at a time, which is what lets static __shared__ variables be per-thread storage.
#pragma once

#include <cstdint>
#include <functional>

namespace lab::cuda::emu {

// Calls body(i) for every i in [0, count) on the calling thread and the helpers, and returns when every call
// has returned. Once a call returns false, indices not yet taken are skipped.
void run_parallel(uint64_t count, const std::function<bool(uint64_t)>& body);

}  // namespace lab::cuda::emu
