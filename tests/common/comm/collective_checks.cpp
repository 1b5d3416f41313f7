// The shared checks of the backends' operations (collective_checks.h).
#include "tests/common/comm/collective_checks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/util/rng.h"
#include "tests/common/comm/mpi_test_data.h"

namespace lab::testing {

using comm::Communicator;
using comm::OpKind;
using comm::ReduceOp;

namespace {

constexpr DType kReducibleDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32};
constexpr DType kAllDtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::U16};
constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max};
constexpr int64_t kSizes[] = {0, 1, 7, 1001};

bool allowed(DType dtype, ReduceOp op) {
  return !(dtype == DType::I32 && op == ReduceOp::Avg);
}

}  // namespace

void check_all_reduce(Communicator& comm, Device device) {
  uint64_t seed = shared_seed(comm, device);
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
  uint64_t seed = shared_seed(comm, device);
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
  uint64_t seed = shared_seed(comm, device);
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
  uint64_t seed = shared_seed(comm, device);
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

// Each combination of two 16-bit values rounds at most once more (in float, then to 16 bits), so the result
// is within (ranks) roundings of the exact sum; a reduction that dropped bits or added the raw 16-bit
// patterns would be far outside.
void check_all_reduce_of_random_floats(Communicator& comm, Device device) {
  const uint64_t seed = shared_seed(comm, device);
  const int n = comm.size();
  constexpr int64_t kCount = 4096;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(cat(dtype_name(dtype), " on ", device.str(), ", seed ", seed));
    std::vector<std::vector<float>> inputs(n);  // every rank's input, as rounded to dtype
    for (int r = 0; r < n; ++r) {
      Rng rng(seed + static_cast<uint64_t>(r));
      std::vector<float> v(kCount);
      for (float& x : v) x = rng.normal();
      inputs[r] = Tensor::from_floats(v, {kCount}).to_dtype(dtype).to_floats();
    }
    Tensor tensor = Tensor::from_floats(inputs[comm.rank()], {kCount}).to_dtype(dtype).to(device);
    comm.all_reduce(tensor, ReduceOp::Sum);
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

// Every rank counts the same payload for a collective; point-to-point counts what this rank moved.
void check_traffic_counts(Communicator& comm, Device device) {
  const int64_t n = comm.size();
  comm.all_reduce(Tensor::zeros({10}, DType::F32, device), ReduceOp::Sum);
  comm.all_reduce(Tensor::zeros({6}, DType::BF16, device), ReduceOp::Max);
  comm.reduce_scatter(Tensor::zeros({3 * n}, DType::F32, device), Tensor::zeros({3}, DType::F32, device),
                      ReduceOp::Avg);
  comm.all_gather(Tensor::zeros({5 * n}, DType::F16, device));
  comm.broadcast(Tensor::zeros({7}, DType::I32, device), 1);
  comm.barrier();
  if (comm.rank() == 0) comm.send(Tensor::zeros({9}, DType::F32, device), 1);
  if (comm.rank() == 1) comm.recv(Tensor::zeros({9}, DType::F32, device), 0);

  const auto expect = [&](OpKind kind, uint64_t calls, uint64_t bytes) {
    EXPECT_EQ(comm.traffic(kind).calls, calls) << op_kind_name(kind);
    EXPECT_EQ(comm.traffic(kind).bytes, bytes) << op_kind_name(kind);
  };
  expect(OpKind::AllReduce, 2, 40 + 12);
  expect(OpKind::ReduceScatter, 1, 12 * n);
  expect(OpKind::AllGather, 1, 10 * n);
  expect(OpKind::Broadcast, 1, 28);
  expect(OpKind::Barrier, 1, 0);
  expect(OpKind::Send, comm.rank() == 0 ? 1 : 0, comm.rank() == 0 ? 36 : 0);
  expect(OpKind::Recv, comm.rank() == 1 ? 1 : 0, comm.rank() == 1 ? 36 : 0);
  comm.reset_traffic();
  expect(OpKind::AllReduce, 0, 0);
}

// Even ranks send first and odd ranks receive first, so blocking sends of large messages cannot wait on
// each other in a cycle.
void check_ring_exchange(Communicator& comm, Device device, int64_t largest) {
  const int n = comm.size();
  const int next = (comm.rank() + 1) % n;
  const int prev = (comm.rank() + n - 1) % n;
  uint64_t seed = shared_seed(comm, device);
  for (DType dtype : kAllDtypes)
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{777}, largest}) {
      SCOPED_TRACE(cat(count, " ", dtype_name(dtype), " on ", device.str(), ", seed ", seed));
      const Tensor outgoing = tensor_of(small_ints(seed, comm.rank(), count), dtype, device);
      const Tensor incoming = Tensor::zeros({count}, dtype, device);
      if (comm.rank() % 2 == 0) {
        comm.send(outgoing, next, 3);
        comm.recv(incoming, prev, 3);
      } else {
        comm.recv(incoming, prev, 3);
        comm.send(outgoing, next, 3);
      }
      EXPECT_EQ(values_of(incoming), values_of(tensor_of(small_ints(seed, prev, count), dtype)));
      ++seed;
    }
}

std::vector<int32_t> members(Communicator& group, int world_rank, Device device) {
  Tensor ranks = Tensor::zeros({group.size()}, DType::I32);
  ranks.data<int32_t>()[group.rank()] = world_rank;
  ranks = ranks.to(device);
  group.all_gather(ranks);
  return ranks.to_ints();
}

}  // namespace lab::testing
