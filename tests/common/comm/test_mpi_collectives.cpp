// The MPI backend's collectives against the single-process truth (mpi_test_data.h): every collective,
// dtype and reduction, in place and out of place, at zero, one, odd and larger sizes; fresh inputs on
// every run. In a CUDA build the same checks run on CUDA tensors (staged through pinned host memory).
#include <gtest/gtest.h>

#include <cmath>

#include "common/comm/mpi_communicator.h"
#include "common/util/rng.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/comm/mpi_test_data.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif

namespace lab::comm {
namespace {

using lab::testing::expected_reduction;
using lab::testing::fresh_communicator;
using lab::testing::shared_seed;
using lab::testing::small_ints_of_every_rank;
using lab::testing::tensor_of;
using lab::testing::values_of;

constexpr DType kReducibleDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32};
constexpr DType kAllDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U16};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};
constexpr int64_t kSizes[] = {0, 1, 7, 1001};

bool allowed(DType dtype, ReduceOp op) {
  return !(dtype == DType::I32 && op == ReduceOp::Avg);
}

// ---------------------------------------------------------------- the checks, on any device

void check_all_reduce(Communicator& comm, Device device) {
  uint64_t seed = shared_seed(comm);
  for (DType dtype : kReducibleDtypes)
    for (ReduceOp op : kOps)
      for (int64_t count : kSizes)
        for (bool in_place : {true, false}) {
          if (!allowed(dtype, op)) continue;
          SCOPED_TRACE(cat(reduce_op_name(op), " of ", count, " ", dtype_name(dtype), in_place ? " in place" : "",
                           " on ", device.str(), ", seed ", seed));
          const auto ks = small_ints_of_every_rank(seed++, comm.size(), count);
          const Tensor input = tensor_of(ks[comm.rank()], dtype, device);
          const std::vector<float> input_values = values_of(input);
          Tensor result = input;
          if (in_place) {
            comm.all_reduce(input, op);
          } else {
            result = Tensor::zeros({count}, dtype, device);
            comm.all_reduce(input, result, op);
            EXPECT_EQ(values_of(input), input_values) << "the input changed";
          }
          EXPECT_EQ(values_of(result), expected_reduction(ks, 0, count, dtype, op));
        }
}

void check_reduce_scatter(Communicator& comm, Device device) {
  uint64_t seed = shared_seed(comm);
  for (DType dtype : kReducibleDtypes)
    for (ReduceOp op : kOps)
      for (int64_t block : {0, 1, 5, 333}) {
        if (!allowed(dtype, op)) continue;
        SCOPED_TRACE(cat(reduce_op_name(op), " of blocks of ", block, " ", dtype_name(dtype), " on ", device.str(),
                         ", seed ", seed));
        const auto ks = small_ints_of_every_rank(seed++, comm.size(), comm.size() * block);
        const Tensor input = tensor_of(ks[comm.rank()], dtype, device);
        const Tensor output = Tensor::zeros({block}, dtype, device);
        comm.reduce_scatter(input, output, op);
        EXPECT_EQ(values_of(output), expected_reduction(ks, comm.rank() * block, block, dtype, op));
      }
}

void check_all_gather(Communicator& comm, Device device) {
  uint64_t seed = shared_seed(comm);
  for (DType dtype : kAllDtypes)
    for (int64_t block : {0, 1, 5, 333})
      for (bool in_place : {true, false}) {
        SCOPED_TRACE(cat("blocks of ", block, " ", dtype_name(dtype), in_place ? " in place" : "", " on ", device.str(),
                         ", seed ", seed));
        const auto ks = small_ints_of_every_rank(seed++, comm.size(), block);
        std::vector<float> expected;
        for (const auto& rank_ks : ks) {
          const std::vector<float> values = values_of(tensor_of(rank_ks, dtype));
          expected.insert(expected.end(), values.begin(), values.end());
        }
        const Tensor mine = tensor_of(ks[comm.rank()], dtype, device);
        if (in_place) {
          // The other blocks start as this rank's values, which the gather must overwrite.
          Tensor buffer = Tensor::empty({comm.size() * block}, dtype, device);
          for (int r = 0; r < comm.size(); ++r) buffer.view(r * block, {block}).copy_from(mine);
          comm.all_gather(buffer);
          EXPECT_EQ(values_of(buffer), expected);
        } else {
          Tensor output = Tensor::zeros({comm.size() * block}, dtype, device);
          comm.all_gather(mine, output);
          EXPECT_EQ(values_of(output), expected);
        }
      }
}

void check_broadcast(Communicator& comm, Device device) {
  uint64_t seed = shared_seed(comm);
  for (int root = 0; root < comm.size(); ++root)
    for (DType dtype : kAllDtypes)
      for (int64_t count : {0, 1, 1001}) {
        SCOPED_TRACE(cat(count, " ", dtype_name(dtype), " from root ", root, " on ", device.str(), ", seed ", seed));
        const auto ks = small_ints_of_every_rank(seed++, comm.size(), count);
        const Tensor tensor = tensor_of(ks[comm.rank()], dtype, device);
        comm.broadcast(tensor, root);
        EXPECT_EQ(values_of(tensor), values_of(tensor_of(ks[root], dtype)));
      }
}

// ---------------------------------------------------------------- CPU tensors

TEST(MpiCollectives, WorldIsMpi) {
  EXPECT_EQ(lab::testing::mpi_world().backend(), "mpi");
  EXPECT_GE(lab::testing::mpi_world().size(), 2);
}

TEST(MpiCollectives, AllReduceEveryDtypeOpAndSize) {
  check_all_reduce(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, ReduceScatterEveryDtypeOpAndSize) {
  check_reduce_scatter(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, AllGatherEveryDtypeAndSize) {
  check_all_gather(*fresh_communicator(), Device::cpu());
}

TEST(MpiCollectives, BroadcastFromEveryRoot) {
  check_broadcast(*fresh_communicator(), Device::cpu());
}

// Arbitrary floats do not sum exactly: each combination of two 16-bit values is rounded once (in float,
// then to 16 bits), so the result is within (ranks) roundings of the exact sum, relative to the sum of
// magnitudes. A reduction that dropped bits or added the raw 16-bit patterns would be far outside.
TEST(MpiCollectives, AllReduceOfRandomFloatsIsWithinRoundingOfTheExactSum) {
  auto comm = fresh_communicator();
  const uint64_t seed = shared_seed(*comm);
  const int n = comm->size();
  constexpr int64_t kCount = 4096;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(cat(dtype_name(dtype), ", seed ", seed));
    std::vector<std::vector<float>> inputs(n);  // every rank's input, as rounded to dtype
    for (int r = 0; r < n; ++r) {
      Rng rng(seed + static_cast<uint64_t>(r));
      std::vector<float> v(kCount);
      for (float& x : v) x = rng.normal();
      inputs[r] = Tensor::from_floats(v, {kCount}).to_dtype(dtype).to_floats();
    }
    Tensor tensor = Tensor::from_floats(inputs[comm->rank()], {kCount}).to_dtype(dtype);
    comm->all_reduce(tensor, ReduceOp::Sum);
    const std::vector<float> result = tensor.to_floats();
    const double unit_roundoff = dtype == DType::F32 ? 0x1p-24 : dtype == DType::BF16 ? 0x1p-8 : 0x1p-11;
    for (int64_t i = 0; i < kCount; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        exact += inputs[r][i];
        magnitude += std::fabs(inputs[r][i]);
      }
      ASSERT_LE(std::fabs(result[i] - exact), n * unit_roundoff * magnitude) << "element " << i;
    }
  }
}

TEST(MpiCollectives, SequenceNumbersAgreeAcrossRanks) {
  auto comm = fresh_communicator();
  comm->barrier();
  comm->all_reduce(Tensor::zeros({3}, DType::F32), ReduceOp::Sum);
  Tensor sequences = Tensor::zeros({comm->size()}, DType::I32);
  sequences.data<int32_t>()[comm->rank()] = static_cast<int32_t>(comm->sequence());
  comm->all_gather(sequences);  // #3
  EXPECT_EQ(sequences.to_ints(), std::vector<int32_t>(comm->size(), 2));
  EXPECT_EQ(comm->sequence(), 3u);
}

// Every rank counts the same payload for a collective; point-to-point counts what this rank moved.
TEST(MpiCollectives, TrafficCountsEachKindsCallsAndPayload) {
  auto comm = fresh_communicator();
  const int64_t n = comm->size();
  comm->all_reduce(Tensor::zeros({10}, DType::F32), ReduceOp::Sum);
  comm->all_reduce(Tensor::zeros({6}, DType::BF16), ReduceOp::Max);
  comm->reduce_scatter(Tensor::zeros({3 * n}, DType::F32), Tensor::zeros({3}, DType::F32), ReduceOp::Avg);
  comm->all_gather(Tensor::zeros({5 * n}, DType::F16));
  comm->broadcast(Tensor::zeros({7}, DType::I32), 1);
  comm->barrier();
  if (comm->rank() == 0) comm->send(Tensor::zeros({9}, DType::F32), 1);
  if (comm->rank() == 1) comm->recv(Tensor::zeros({9}, DType::F32), 0);

  const auto expect = [&](OpKind kind, uint64_t calls, uint64_t bytes) {
    EXPECT_EQ(comm->traffic(kind).calls, calls) << op_kind_name(kind);
    EXPECT_EQ(comm->traffic(kind).bytes, bytes) << op_kind_name(kind);
  };
  expect(OpKind::AllReduce, 2, 40 + 12);
  expect(OpKind::ReduceScatter, 1, 12 * n);
  expect(OpKind::AllGather, 1, 10 * n);
  expect(OpKind::Broadcast, 1, 28);
  expect(OpKind::Barrier, 1, 0);
  expect(OpKind::Send, comm->rank() == 0 ? 1 : 0, comm->rank() == 0 ? 36 : 0);
  expect(OpKind::Recv, comm->rank() == 1 ? 1 : 0, comm->rank() == 1 ? 36 : 0);
  comm->reset_traffic();
  expect(OpKind::AllReduce, 0, 0);
}

// ---------------------------------------------------------------- CUDA tensors

#ifdef LAB_WITH_CUDA
TEST(MpiCollectives, CudaTensorsStagedThroughPinnedMemory) {
  auto comm = fresh_communicator();
  // Every rank must take the same path: all skip if any rank sees no GPU.
  Tensor without_gpu = Tensor::from_ints(std::vector<int32_t>{cuda::device_count() > 0 ? 0 : 1}, {1});
  comm->all_reduce(without_gpu, ReduceOp::Max);
  if (without_gpu.to_ints()[0] != 0) GTEST_SKIP() << "a rank sees no GPU";
  const Device gpu = Device::cuda(comm->rank() % cuda::device_count());
  check_all_reduce(*comm, gpu);
  check_reduce_scatter(*comm, gpu);
  check_all_gather(*comm, gpu);
  check_broadcast(*comm, gpu);
}
#endif

}  // namespace
}  // namespace lab::comm
