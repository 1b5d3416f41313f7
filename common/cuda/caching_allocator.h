// The CUDA caching allocator: size-class free lists per device, stream-aware reuse, and the same
// per-category accounting as the CPU allocator (plus reserved bytes and the number of cudaMalloc calls).
#pragma once

#include "common/core/memory.h"

namespace lab::cuda {

Allocator& caching_allocator(int device);

}  // namespace lab::cuda
