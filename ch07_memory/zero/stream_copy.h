// A copy between two tensors of one device, queued on the current stream on a GPU: ZeRO packs its buckets for a
// collective and unpacks what comes back with it. Tensor::copy_from makes the host wait for the copy, which a CUDA
// graph's capture refuses; queued on the stream, the copy is ordered with the kernels and collectives around it
// (which read and write the same memory on the same stream), and the step can be captured. On the CPU, an
// ordinary copy.
#pragma once

#include "common/core/tensor.h"

namespace lab::ch07 {

// `dst` and `src`: the same element count, dtype and device (InvalidArgument otherwise), not overlapping.
void copy_on_stream(const Tensor& dst, const Tensor& src);

}  // namespace lab::ch07
