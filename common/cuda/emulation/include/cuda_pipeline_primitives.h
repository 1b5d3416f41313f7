// Stand-in for the CUDA toolkit's cuda_pipeline_primitives.h (LAB_CUDA_EMULATION): asynchronous copies from
// global into shared memory (cp.async on sm_80 and later), in batches a thread commits and waits for.
//
//   __pipeline_memcpy_async(dst, src, 16);     // queue a 16-byte copy (4, 8 or 16; zfill: zeros at the end)
//   __pipeline_commit();                       // close the batch of the copies queued since the last commit
//   __pipeline_wait_prior(1);                  // wait until at most the 1 latest batch is still in flight
//
// On a GPU a copy lands at some moment between its issue and the wait that covers it, and only the issuing
// thread's wait covers it: the other threads of the block see it after a __syncthreads that follows that wait.
// The emulator makes every copy land as late as allowed, inside the issuing thread's wait, so a kernel that
// reads a buffer before its wait, or waits for too few batches, reads the old contents, as it may on a GPU, and
// fails its tests. Under a shuffled schedule (LAB_EMU_SEED) half the copies land at once instead, so a kernel
// that refills a buffer before every thread has finished reading it (a missing barrier) fails there too. A copy
// into anything but the block's dynamic shared memory, from anything but device memory, misaligned, or of another
// size is a fault naming the kernel and thread (the toolkit's header asserts the same in debug builds).
#pragma once

#include <cstddef>

#include "device_functions.h"

inline void __pipeline_memcpy_async(void* __restrict__ dst_shared, const void* __restrict__ src_global,
                                    size_t size_and_align, size_t zfill = 0) {
  lab::cuda::emu::device::async_copy(dst_shared, src_global, size_and_align, zfill);
}

inline void __pipeline_commit() {
  lab::cuda::emu::device::async_commit();
}

inline void __pipeline_wait_prior(size_t prior) {
  lab::cuda::emu::device::async_wait_prior(prior);
}
