// How lab's dtypes and reductions map onto MPI. MPI has no bf16 or f16 type and no average:
//   - 16-bit floats travel as MPI_UINT16_T and are reduced by user-defined operators that widen both
//     operands to float, combine them, and round once per combination (the best a pairwise reduction of
//     16-bit buffers can do; NCCL does the same);
//   - an average is a sum, divided by the number of ranks afterwards (divide_elements).
// Built with LAB_WITH_MPI only.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "common/comm/communicator.h"

namespace lab::comm {

// The MPI datatype of one element of `dtype`.
MPI_Datatype mpi_datatype(DType dtype);

// The MPI operator for `op` on `dtype` (Avg maps to the sum): MPI_SUM or MPI_MAX for f32 and i32, one
// of the float-accumulating user operators for bf16 and f16. The communicator's base class has already
// rejected the combinations it does not allow.
MPI_Op mpi_reduce_op(DType dtype, ReduceOp op);

// The user operators exist between MPI_Init and MPI_Finalize: MpiRuntime creates and frees them.
void create_16bit_reduce_ops();
void free_16bit_reduce_ops();

// Divides each of `count` elements at `data` by `divisor`, in float, rounding 16-bit floats once.
void divide_elements(void* data, int64_t count, DType dtype, int divisor);

}  // namespace lab::comm
