// The CUDA caching allocator: size-class free lists per device, stream-aware reuse, and the same
// per-category accounting as the CPU allocator (plus reserved bytes and the number of cudaMalloc calls).
//
// Why cache: cudaMalloc and cudaFree are slow and synchronise the device, and a training step frees and
// re-allocates the same activation buffers every step. A freed block goes to the free list of its size
// class and *of the stream it was allocated on*, and is handed out again only for an allocation on that
// stream. Work on one stream runs in order, so a block can be reused at once, even while kernels that
// read it are still queued: they run before anything queued by its next owner. Reusing it on another
// stream would need an event; this allocator simply never does it.
//
// Sizes are rounded up to quarter-powers of two (at most 25% slack, 512 bytes at least). When cudaMalloc
// fails, the allocator empties its cache and tries once more; if that fails too, it throws
// Error(ErrorKind::Cuda) naming the requested size and the live/reserved totals.
#pragma once

#include <cstddef>

#include "common/core/memory.h"

namespace lab::cuda {

// The allocator of GPU `device`; throws InvalidArgument for a device that is not visible.
Allocator& caching_allocator(int device);

// The size class a request of `bytes` is rounded up to (exposed for tests).
size_t cuda_size_class(size_t bytes);

}  // namespace lab::cuda
