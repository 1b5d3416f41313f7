// Inputs whose reductions every rank can compute exactly by itself, for the tests under mpirun.
//
// Rank r's input is drawn from (seed, r), and rank 0 shares the seed, so each rank knows every rank's
// input and can compute what a collective must produce, with no communication: the single-process truth.
// The values are k / 4 (k for integer dtypes) with |k| <= 63: any sum of up to four of them is a multiple
// of 1/4 below 64 in magnitude, 8 significant bits at most, exact even in bf16, so the expected result is
// the same whatever order MPI reduces in.
#pragma once

#include <cstdint>
#include <vector>

#include "common/comm/communicator.h"
#include "common/core/tensor.h"

namespace lab::testing {

// A seed drawn by rank 0 and broadcast over `comm` in a tensor on `device`, fresh for every run (print it
// with SCOPED_TRACE).
uint64_t shared_seed(comm::Communicator& comm, Device device = Device::cpu());

// Rank `rank`'s small integers k for `seed`.
std::vector<int32_t> small_ints(uint64_t seed, int rank, int64_t count);
// Every rank's small integers, indexed by rank.
std::vector<std::vector<int32_t>> small_ints_of_every_rank(uint64_t seed, int ranks, int64_t count);

// A tensor of the values of `ks` in `dtype` (k / 4 for floating dtypes, k for i32, k + 63 for u16).
Tensor tensor_of(const std::vector<int32_t>& ks, DType dtype, Device device = Device::cpu());
// A tensor's elements as floats, whatever its dtype and device.
std::vector<float> values_of(const Tensor& tensor);

// Elements [begin, begin + count) of the reduction over ranks of the inputs `ks_by_rank`, as the backend
// must produce them: the exact sum or max; for avg the sum divided by the number of ranks in float; then
// rounded to `dtype`.
std::vector<float> expected_reduction(const std::vector<std::vector<int32_t>>& ks_by_rank, int64_t begin, int64_t count,
                                      DType dtype, comm::ReduceOp op);

}  // namespace lab::testing
