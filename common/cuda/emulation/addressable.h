// What the caching allocator tells AddressSanitizer about its blocks (LAB_CUDA_EMULATION only).
//
// In the sanitized emulation build device memory is host memory that AddressSanitizer watches, but only at the
// ends of each cudaMalloc: the caching allocator cuts its segments into blocks, so a kernel that ran past its
// tensor's end would land in the next block unseen. The allocator therefore marks the bytes of a block past its
// request, and every free block, as not addressable (common/cuda/block_marks.h says when each mark is made). A
// kernel, copy or memset that touches them is a "use-after-poison" report naming the code that touched them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace lab::cuda::emu {

// Whether AddressSanitizer watches this build (the marks below do nothing otherwise).
bool address_sanitizer();

// Marks [ptr, ptr + bytes) addressable or not. cudaFree makes the whole allocation addressable again, as the
// host allocator expects memory it takes back.
void set_addressable(void* ptr, size_t bytes, bool addressable);

// Runs `work` on `stream`'s thread once everything queued on it before has run (`stream` of `device`; null and
// cudaStreamLegacy name that device's legacy stream). Not a CUDA call: nothing else waits for it, and it waits for
// nothing of another stream, so it changes no order between streams. False, with nothing queued, when the stream
// is not a live one or is capturing.
bool after_queued_work(int device, cudaStream_t stream, std::function<void()> work);

}  // namespace lab::cuda::emu
