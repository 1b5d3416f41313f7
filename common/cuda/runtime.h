// The small host-side surface of the CUDA backend that the core calls into (only when LAB_WITH_CUDA).
// Kernels and the rest of the CUDA helpers live beside this header in common/cuda/ and common/ops/cuda/.
#pragma once

#include <cstddef>

#include "common/core/device.h"

namespace lab::cuda {

// Number of visible GPUs; 0 when there is no driver or no device (never throws).
int device_count();

// Synchronous copy between any two of host / device memory (device-to-device included).
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

// Zeroes device memory on the current stream.
void memset_zero(void* dst, Device device, size_t bytes);

}  // namespace lab::cuda
