// Groups under MPI: split() (membership, order by key, ranks left out, sequence numbers) and the parallel
// context in every layout of the world's ranks, each group's members checked by gathering their world
// ranks and comparing with the layout arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "common/comm/parallel_context.h"
#include "tests/common/comm/collective_checks.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;
using lab::testing::fresh_communicator;
using lab::testing::members;

TEST(MpiGroups, SplitGroupsByColorAndOrdersThemByKey) {
  auto comm = fresh_communicator();
  const int n = comm->size();
  const int rank = comm->rank();
  // Even and odd ranks, each group ordered from the highest rank down.
  auto group = comm->split(rank % 2, -rank);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->backend(), "mpi");
  std::vector<int32_t> expected;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == rank % 2) expected.push_back(r);
  EXPECT_EQ(members(*group, rank), expected);
  EXPECT_EQ(group->rank(), static_cast<int>(std::find(expected.begin(), expected.end(), rank) - expected.begin()));

  // A group numbers its own operations; the split was one operation of the parent.
  EXPECT_EQ(group->sequence(), 1u);  // the gather in members()
  EXPECT_EQ(comm->sequence(), 1u);
  Tensor sum = Tensor::from_ints(std::vector<int32_t>{rank}, {1});
  group->all_reduce(sum, ReduceOp::Sum);
  EXPECT_EQ(sum.to_ints()[0], std::accumulate(expected.begin(), expected.end(), 0));
}

TEST(MpiGroups, ARankWithNoGroupGetsNone) {
  auto comm = fresh_communicator();
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

// ---------------------------------------------------------------- the parallel context

std::vector<ParallelLayout> every_layout(int ranks) {
  std::vector<ParallelLayout> layouts;
  for (int dp = 1; dp <= ranks; ++dp)
    for (int tp = 1; dp * tp <= ranks; ++tp)
      if (ranks % (dp * tp) == 0) layouts.push_back({.dp = dp, .tp = tp, .pp = ranks / (dp * tp)});
  return layouts;
}

TEST(MpiParallelContext, EveryLayoutGroupsTheRightRanks) {
  auto world = fresh_communicator();
  const int rank = world->rank();
  for (const ParallelLayout& layout : every_layout(world->size())) {
    SCOPED_TRACE(layout.str());
    const ParallelContext context(*world, layout);
    const ParallelCoords me = coords_of_rank(layout, rank);
    EXPECT_EQ(context.coords(), me);
    EXPECT_EQ(context.tp().rank(), me.tp);
    EXPECT_EQ(context.pp().rank(), me.pp);
    EXPECT_EQ(context.dp().rank(), me.dp);

    // Each group holds exactly the ranks that share the other two coordinates, ordered by its own.
    std::vector<int32_t> tp_group, pp_group, dp_group;
    for (int t = 0; t < layout.tp; ++t) tp_group.push_back(rank_of_coords(layout, {.dp = me.dp, .tp = t, .pp = me.pp}));
    for (int p = 0; p < layout.pp; ++p) pp_group.push_back(rank_of_coords(layout, {.dp = me.dp, .tp = me.tp, .pp = p}));
    for (int d = 0; d < layout.dp; ++d) dp_group.push_back(rank_of_coords(layout, {.dp = d, .tp = me.tp, .pp = me.pp}));
    EXPECT_EQ(members(context.tp(), rank), tp_group);
    EXPECT_EQ(members(context.pp(), rank), pp_group);
    EXPECT_EQ(members(context.dp(), rank), dp_group);

    EXPECT_EQ(context.is_first_stage(), me.pp == 0);
    EXPECT_EQ(context.is_last_stage(), me.pp == layout.pp - 1);
    EXPECT_EQ(context.prev_stage(), me.pp > 0 ? std::optional<int>(me.pp - 1) : std::nullopt);
    EXPECT_EQ(context.next_stage(), me.pp < layout.pp - 1 ? std::optional<int>(me.pp + 1) : std::nullopt);
    EXPECT_EQ(context.describe(), cat("rank ", rank, ": dp ", me.dp, "/", layout.dp, ", tp ", me.tp, "/", layout.tp,
                                      ", pp ", me.pp, "/", layout.pp));

    // A pipeline hop: each stage sends its world rank to the next one.
    if (const auto next = context.next_stage())
      context.pp().send(Tensor::from_ints(std::vector<int32_t>{rank}, {1}), *next);
    if (const auto prev = context.prev_stage()) {
      Tensor from = Tensor::zeros({1}, DType::I32);
      context.pp().recv(from, *prev);
      EXPECT_EQ(from.to_ints()[0], rank_of_coords(layout, {.dp = me.dp, .tp = me.tp, .pp = me.pp - 1}));
    }
  }
}

TEST(MpiParallelContext, ALayoutThatDoesNotCoverTheWorldIsRejected) {
  auto world = fresh_communicator();
  const int n = world->size();
  expect_error([&] { ParallelContext(*world, {.dp = n, .tp = 2, .pp = 1}); }, ErrorKind::InvalidArgument,
               {cat("dp ", n, " x tp 2 x pp 1 needs ", 2 * n, " ranks, but the world has ", n)});
  // Rejected before any split: the world is still in step.
  EXPECT_EQ(world->sequence(), 0u);
  world->barrier();
}

}  // namespace
}  // namespace lab::comm
