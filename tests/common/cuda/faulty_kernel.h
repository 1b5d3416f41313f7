// A kernel that faults on purpose, for the tests of fault reporting (test_sync_launch.cpp).
#pragma once

#include "common/core/tensor.h"

namespace lab::test {

// Launches barrier_misuse_kernel on `out`'s device and current stream (one block of 64 threads; `out` holds at
// least 64 floats). After a few milliseconds of work, half of the block returns before a __syncthreads that the
// other half waits at: undefined behaviour on a GPU (it may hang or appear to work), a fault naming the kernel
// in the emulation build.
void launch_barrier_misuse(const Tensor& out);

// Loads barrier_misuse_kernel without running it (a cudaFuncSetAttribute that changes nothing): CUDA loads a
// kernel at its first use and may synchronise the device to do it, so a test that launches it behind a held
// stream loads it first.
void load_barrier_misuse();

}  // namespace lab::test
