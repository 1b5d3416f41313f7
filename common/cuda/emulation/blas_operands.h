// What the cuBLAS and cuBLASLt stand-ins share: the check that a matrix operand lies in memory the GPU can
// read. A GEMM handed a host pointer would fault on a GPU (an illegal address, found when its kernel runs);
// the emulator finds it when the call is made and faults the device the same way, naming the call and the
// operand.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lab::cuda::emu {

// True when every matrix of a batched column-major operand (rows x cols, leading dimension ld, `batch`
// matrices `stride` elements apart) lies inside one device or pinned allocation; otherwise faults `device`
// with a message naming `call` and `operand` and returns false.
bool check_operand(int device, const char* call, const char* operand, const void* data, size_t element_bytes,
                   int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride);

}  // namespace lab::cuda::emu
