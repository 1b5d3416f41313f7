// Groups under NCCL: split() through ncclCommSplit (membership, order by key, ranks left out, sequence
// numbers) and the parallel context over an NCCL world, each group's members gathered on the GPU and
// compared with the layout arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/comm/parallel_context.h"
#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/nccl_test.h"

namespace lab::comm {
namespace {

using lab::testing::fresh_nccl_communicator;
using lab::testing::members;
using lab::testing::rank_gpu;

TEST(NcclGroups, SplitGroupsByColorAndOrdersThemByKey) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  const int n = comm->size();
  const int rank = comm->rank();
  // Even and odd ranks, each group ordered from the highest rank down.
  auto group = comm->split(rank % 2, -rank);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->backend(), "nccl");
  std::vector<int32_t> expected;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == rank % 2) expected.push_back(r);
  EXPECT_EQ(members(*group, rank, rank_gpu()), expected);
  EXPECT_EQ(group->rank(), static_cast<int>(std::find(expected.begin(), expected.end(), rank) - expected.begin()));
  EXPECT_EQ(group->sequence(), 1u);  // the gather in members()
  EXPECT_EQ(comm->sequence(), 1u);
  Tensor sum = Tensor::from_ints(std::vector<int32_t>{rank}, {1}).to(rank_gpu());
  group->all_reduce(sum, ReduceOp::Sum);
  EXPECT_EQ(sum.to_ints()[0], std::accumulate(expected.begin(), expected.end(), 0));
}

TEST(NcclGroups, ARankWithNoGroupGetsNone) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto comm = fresh_nccl_communicator();
  auto group = comm->split(comm->rank() == 0 ? kNoGroup : 7, comm->rank());
  if (comm->rank() == 0) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), comm->size() - 1);
  EXPECT_EQ(group->rank(), comm->rank() - 1);
  group->barrier();
}

// Two layouts of the world: dp 2 x tp n/2, and one pipeline over every rank.
TEST(NcclGroups, TheParallelContextGroupsTheRightRanks) {
  LAB_REQUIRE_GPU_ON_EVERY_RANK();
  auto world = fresh_nccl_communicator();
  const int rank = world->rank();
  const int n = world->size();
  for (const ParallelLayout& layout :
       {ParallelLayout{.dp = 2, .tp = n / 2, .pp = 1}, ParallelLayout{.dp = 1, .tp = 1, .pp = n}}) {
    SCOPED_TRACE(layout.str());
    const ParallelContext context(*world, layout);
    const ParallelCoords me = coords_of_rank(layout, rank);
    std::vector<int32_t> tp_group, pp_group, dp_group;
    for (int t = 0; t < layout.tp; ++t) tp_group.push_back(rank_of_coords(layout, {.dp = me.dp, .tp = t, .pp = me.pp}));
    for (int p = 0; p < layout.pp; ++p) pp_group.push_back(rank_of_coords(layout, {.dp = me.dp, .tp = me.tp, .pp = p}));
    for (int d = 0; d < layout.dp; ++d) dp_group.push_back(rank_of_coords(layout, {.dp = d, .tp = me.tp, .pp = me.pp}));
    EXPECT_EQ(members(context.tp(), rank, rank_gpu()), tp_group);
    EXPECT_EQ(members(context.pp(), rank, rank_gpu()), pp_group);
    EXPECT_EQ(members(context.dp(), rank, rank_gpu()), dp_group);
    // A pipeline hop: each stage sends its world rank to the next one.
    if (const auto next = context.next_stage())
      context.pp().send(Tensor::from_ints(std::vector<int32_t>{rank}, {1}).to(rank_gpu()), *next);
    if (const auto prev = context.prev_stage()) {
      Tensor from = Tensor::zeros({1}, DType::I32, rank_gpu());
      context.pp().recv(from, *prev);
      EXPECT_EQ(from.to_ints()[0], rank_of_coords(layout, {.dp = me.dp, .tp = me.tp, .pp = me.pp - 1}));
    }
  }
}

}  // namespace
}  // namespace lab::comm
