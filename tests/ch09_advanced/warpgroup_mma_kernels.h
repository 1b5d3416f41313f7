// One warpgroup through common/ops/cuda/warpgroup_mma.cuh, for test_warpgroup_mma_cuda.cpp: A and B stored in
// shared memory by the layout without swizzling, with the strides a test picks, then one wgmma m64nNk16.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::test {

// Where the product's operands come from, and how they sit in shared memory. Strides in bytes (multiples of 16).
struct WarpgroupOperands {
  bool a_in_registers = false;  // A by register fragments, else by descriptor (K-major)
  bool b_n_major = false;       // B stored [K, N] (imm-trans-b 1), else [N, K]
  bool accumulate = true;       // D = A B + C, else D = A B
  uint32_t a_leading = 128, a_stride = 256, b_leading = 128, b_stride = 256;
};

// d [64, N] f32 = a [64, 16] b [16, N] (+ c [64, N] f32), N = 64 or 128, by wgmma (warpgroup_mma.cuh): a row-major,
// b given row-major as [16, N]; the kernel stores A K-major and B as `how` says, by the documented layout. a and b
// bf16 or f16; all tensors on one CUDA device.
void warpgroup_product(const Tensor& d, const Tensor& a, const Tensor& b, const Tensor& c,
                       const WarpgroupOperands& how);

// Whether wgmma runs here: the emulator, or a compute capability 9.0 GPU with this test built for sm_90a.
bool warpgroup_products_run_here();

}  // namespace lab::test
