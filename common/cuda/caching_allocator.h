// The CUDA caching allocator: segments cut into blocks, free blocks per device and stream found by best fit,
// events for blocks used on other streams, and the same per-category accounting as the CPU allocator (plus reserved
// bytes and the number of cudaMalloc calls).
//
// Why cache: cudaMalloc and cudaFree are slow and synchronise the device, and a training step frees and
// re-allocates the same activation buffers every step.
//
// Streams. Each block has an *owner*: the stream that was current when it was allocated. A freed block goes
// to the free blocks of its owner, and is handed out again for an allocation on that stream. Work on one stream runs in
// order, so the block can be reused at once, even while kernels that read it are still queued: they run before anything
// queued by its next user.
//
// A block read or written by work on *another* stream is different: that work may still be running when the
// owner frees the block. record_stream(tensor, stream) declares such a use, as PyTorch's
// Tensor.record_stream does. When the block is freed, an event is recorded on every stream it was used on,
// and the block goes back to its free list only after all those events have completed (checked, without
// blocking, at later allocations). Without the call, the block could be handed to the owner's next
// allocation and overwritten while the other stream still reads it.
//
// Destroyed streams. Stream's destructor waits for its work and then calls release_stream(): the stream's
// cached blocks move to a pool that every stream takes from, blocks it still owns go there when they are
// freed, and its pending uses are forgotten (they have finished). So no memory stays cached for a stream that
// no longer exists, and a new stream that happens to receive the same handle starts with nothing.
//
// Segments and blocks. Memory comes from cudaMalloc in segments, and a segment is cut into blocks: an allocation
// takes the smallest free block of its owner stream (else of the shared pool) that holds it, and cuts it to its
// size, rounded up to 512 bytes; the rest stays a free block. A freed block joins the free blocks beside it in
// its segment, so a 192 MiB block freed late in a step can serve four 48 MiB requests, and those, freed, make
// the 192 MiB block again. Requests up to 1 MiB are small: they come from segments of 2 MiB that large requests
// never cut, so that small blocks held for long do not split the large segments. A large request that no free
// block holds gets a segment of its size rounded up to 2 MiB. So a block's live bytes are its request plus at
// most 511 bytes, and what the cache holds beyond the live bytes is the free blocks. (Before, blocks were whole
// cudaMalloc'd size classes reused whole: at GPT-2 124M, B = 32, T = 1024 in bf16 with every speed rung and
// selective recompute, the reserved peak was 12739.7 MiB against a live peak of 12398.6 MiB, of which the
// classes' rounding was some 50 MiB; the ch10 README has the figures since.) When cudaMalloc fails, the
// allocator frees every segment that is all free and tries once more; if that fails too, it throws
// Error(ErrorKind::Cuda) naming the requested size and the live/reserved totals. In the sanitized emulation build
// the bytes past each request and every free block are not addressable (block_marks.h): a kernel that runs past
// its tensor's end into them, or uses a freed tensor, is an AddressSanitizer report.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/core/memory.h"

namespace lab {
class Tensor;
}

namespace lab::cuda {

class Stream;

// The allocator of GPU `device`; throws InvalidArgument for a device that is not visible.
Allocator& caching_allocator(int device);

// The size of the block a request of `bytes` gets: a multiple of 512 bytes (exposed for tests).
size_t cuda_block_size(size_t bytes);
// The size of the segment cudaMalloc'd for a request of `bytes` that no free block holds: 2 MiB for a small
// request (up to 1 MiB), else its block size rounded up to 2 MiB (exposed for tests).
size_t cuda_segment_size(size_t bytes);
// The size class of a private pool's block for a request of `bytes`: quarter-powers of two up to 8 MiB (at most
// 25% slack, 512 bytes at least), multiples of 2 MiB above (exposed for tests).
size_t cuda_size_class(size_t bytes);

// Declares that work queued on `stream` uses `tensor`'s memory, so that the memory is not reused before that
// work has finished (see above). A no-op for the stream the memory was allocated on. Throws InvalidArgument
// for a tensor that is not on `stream`'s device or whose memory the caching allocator did not hand out
// (a wrapped buffer).
void record_stream(const Tensor& tensor, const Stream& stream);

// Called by Stream's destructor after the stream's work has finished and before the handle is destroyed:
// the stream's cached blocks go to the shared pool (see above). Never throws.
void release_stream(int device, cudaStream_t stream) noexcept;

// Private pools, for CUDA graphs. A captured graph replays its work on the addresses it was captured with, so
// the memory its capture allocated must stay the graph's: nothing outside may be handed those blocks while the
// graph lives (PyTorch's graph memory pools work so). While a PoolScope is active on a thread, that thread's
// allocations on the pool's device come from the pool's own free lists (new device memory joins the pool), and
// blocks allocated in the pool return to it when freed, whoever frees them; no allocation outside the pool
// receives them. A pool's blocks are whole segments of a size class (cuda_size_class), never cut: an allocation
// takes a block of its class or up to its quarter-power class, the last freed first, so the same sequence of
// allocations and frees gets the same addresses every time, and a step run in its pool after a warm-up step
// allocates nothing new. Allocate from the device before capturing (cudaMalloc is refused during a capture).
// A released pool's blocks become the shared pool's, and are cut and merged as any other.
//
// A new pool on `device`; its id (never 0).
int create_private_pool(int device);
// The pool's cached blocks go to the device's shared pool, and its live blocks go there when they are freed.
void release_private_pool(int device, int pool);
// Makes `pool` the calling thread's pool on `device` until the scope ends (scopes nest).
class PoolScope {
 public:
  PoolScope(int device, int pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  int device_, saved_;
};

}  // namespace lab::cuda
