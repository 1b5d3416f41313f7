// The parallel layout's arithmetic (Megatron's order: tp fastest, then pp, then dp), the context over a
// single-process world, and the world of a program started without mpirun. The same context under
// mpirun, in every layout of 2 and 4 ranks, is tested in test_mpi_groups.cpp.
#include <gtest/gtest.h>

#include <set>

#include "common/comm/parallel_context.h"
#include "common/comm/world.h"
#include "tests/common/expect_error.h"

namespace lab::comm {
namespace {

using lab::testing::expect_error;

TEST(ParallelLayout, TensorParallelVariesFastestThenPipelineThenData) {
  const ParallelLayout layout{.dp = 2, .tp = 2, .pp = 3};
  EXPECT_EQ(layout.ranks(), 12);
  EXPECT_EQ(layout.str(), "dp 2 x tp 2 x pp 3");
  EXPECT_EQ(coords_of_rank(layout, 0), (ParallelCoords{.dp = 0, .tp = 0, .pp = 0}));
  EXPECT_EQ(coords_of_rank(layout, 1), (ParallelCoords{.dp = 0, .tp = 1, .pp = 0}));
  EXPECT_EQ(coords_of_rank(layout, 2), (ParallelCoords{.dp = 0, .tp = 0, .pp = 1}));
  EXPECT_EQ(coords_of_rank(layout, 5), (ParallelCoords{.dp = 0, .tp = 1, .pp = 2}));
  EXPECT_EQ(coords_of_rank(layout, 6), (ParallelCoords{.dp = 1, .tp = 0, .pp = 0}));
  EXPECT_EQ(coords_of_rank(layout, 11), (ParallelCoords{.dp = 1, .tp = 1, .pp = 2}));
}

TEST(ParallelLayout, CoordinatesAndRanksAreInverse) {
  for (const ParallelLayout& layout :
       {ParallelLayout{.dp = 3, .tp = 1, .pp = 2}, ParallelLayout{.dp = 1, .tp = 4, .pp = 1},
        ParallelLayout{.dp = 2, .tp = 3, .pp = 2}}) {
    std::set<int> seen;
    for (int dp = 0; dp < layout.dp; ++dp)
      for (int pp = 0; pp < layout.pp; ++pp)
        for (int tp = 0; tp < layout.tp; ++tp) {
          const ParallelCoords coords{.dp = dp, .tp = tp, .pp = pp};
          const int rank = rank_of_coords(layout, coords);
          EXPECT_EQ(rank, dp * layout.pp * layout.tp + pp * layout.tp + tp) << layout.str();
          EXPECT_EQ(coords_of_rank(layout, rank), coords) << layout.str();
          seen.insert(rank);
        }
    EXPECT_EQ(static_cast<int>(seen.size()), layout.ranks()) << layout.str();
  }
}

TEST(ParallelLayout, OutOfRangeValuesAreErrors) {
  expect_error([] { coords_of_rank({.dp = 2, .tp = 0, .pp = 1}, 0); }, ErrorKind::InvalidArgument,
               {"must be positive", "dp 2 x tp 0 x pp 1"});
  expect_error([] { coords_of_rank({.dp = 2, .tp = 2, .pp = 1}, 4); }, ErrorKind::InvalidArgument,
               {"rank 4 is not in the layout dp 2 x tp 2 x pp 1 (4 ranks)"});
  expect_error([] { rank_of_coords({.dp = 2, .tp = 2, .pp = 1}, {.dp = 0, .tp = 2, .pp = 0}); },
               ErrorKind::InvalidArgument, {"tp 2", "outside the layout"});
}

TEST(ParallelContext, OneRankIsItsOwnEveryGroup) {
  World world;
  const ParallelContext context(world.comm(), {});
  EXPECT_EQ(context.coords(), ParallelCoords{});
  for (Communicator* group : {&context.dp(), &context.tp(), &context.pp()}) {
    EXPECT_EQ(group->size(), 1);
    EXPECT_EQ(group->backend(), "single");
  }
  EXPECT_TRUE(context.is_first_stage());
  EXPECT_TRUE(context.is_last_stage());
  EXPECT_EQ(context.prev_stage(), std::nullopt);
  EXPECT_EQ(context.next_stage(), std::nullopt);
  EXPECT_EQ(context.describe(), "rank 0: dp 0/1, tp 0/1, pp 0/1");
  expect_error([&] { ParallelContext(world.comm(), {.dp = 2}); }, ErrorKind::InvalidArgument,
               {"dp 2 x tp 1 x pp 1 needs 2 ranks, but the world has 1"});
}

// ctest starts this test without mpirun, so the world is one process and MPI is not started.
TEST(World, WithoutMpirunTheWorldIsOneProcess) {
  World world;
  EXPECT_EQ(world.comm().size(), 1);
  EXPECT_EQ(world.comm().backend(), "single");
  EXPECT_EQ(world.comm().timeout(), kProgramCommTimeout);
  World shorter(std::chrono::seconds(5));
  EXPECT_EQ(shorter.comm().timeout(), std::chrono::seconds(5));
}

}  // namespace
}  // namespace lab::comm
