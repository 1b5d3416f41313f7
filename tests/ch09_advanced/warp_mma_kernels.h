// One warp through common/ops/cuda/warp_mma.cuh, for test_warp_mma_cuda.cpp: ldmatrix from shared memory, then
// mma.sync m16n8k16, with the operands stored either way round.
#pragma once

#include "common/core/tensor.h"

namespace lab::test {

// How a 16 x 16 operand sits in memory: row-major, or as its transpose stored row-major (column-major).
enum class Storage { RowMajor, ColumnMajor };

// d [16, 16] f32 = a [16, 16] b [16, 16] + c [16, 16] f32, by ldmatrix (plain or .trans, as each storage needs)
// and four mma_m16n8k16 (two n8 tiles, the B fragments of both from one ldmatrix .x4). a and b are bf16 or f16
// in `a_storage` / `b_storage` (the tensor holds the stored matrix: the transpose for ColumnMajor); all tensors
// on one CUDA device.
void warp_product(const Tensor& d, const Tensor& a, Storage a_storage, const Tensor& b, Storage b_storage,
                  const Tensor& c);

// e [16, 16] f32 = round16(a b) b2, the first product's C fragments packed into the A fragment of the second
// in registers (as the flash kernels turn scores into probabilities); a, b, b2 row-major, bf16 or f16.
void warp_chained_product(const Tensor& e, const Tensor& a, const Tensor& b, const Tensor& b2);

}  // namespace lab::test
