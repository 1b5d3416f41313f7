// Which bytes of device memory a kernel may touch, for AddressSanitizer (LAB_CUDA_EMULATION only).
//
// In the sanitized emulation build device memory is host memory that AddressSanitizer watches, but only at the
// ends of each cudaMalloc: the caching allocator cuts its segments into blocks, so a kernel that runs past its
// tensor's end lands in the next block, where no check sees it. The allocator therefore marks, in each stream's
// order, the bytes past a block's request and every free block as not addressable: a kernel that touches them
// reads "use-after-poison" in AddressSanitizer's report. The marks run in stream order because a block freed on
// the host may still be read by kernels queued before the free (CUDA's stream-ordered reuse); marking it at once
// would report them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace lab::cuda::emu {

// Queues on `stream` the marking of [ptr, ptr + size): its first `addressable` bytes may be touched, the rest
// not. Does nothing in a build without AddressSanitizer, or for a stream that does not exist.
void mark_addressable(cudaStream_t stream, void* ptr, size_t addressable, size_t size);

}  // namespace lab::cuda::emu
