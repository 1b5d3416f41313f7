// BatchPlan: the batch contract (offsets, pieces across shard boundaries), the rank round-robin, the
// seeded shuffles, and the errors for options and shards that cannot make a batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/data/batch_plan.h"
#include "tests/common/data/shard_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::scratch_directory;
using testing::write_counting_shards;

LoaderOptions options(int64_t batch, int64_t seq, int rank = 0, int world = 1) {
  LoaderOptions o;
  o.batch = batch;
  o.seq = seq;
  o.rank = rank;
  o.world = world;
  return o;
}

// The stream positions the pieces of batch k cover, in order.
std::vector<int64_t> covered(const BatchPlan& plan, int64_t k, const std::vector<int64_t>& shard_starts) {
  std::vector<int64_t> out;
  for (const ShardPiece& p : plan.pieces(k))
    for (int64_t i = 0; i < p.count; ++i) out.push_back(shard_starts[static_cast<size_t>(p.shard)] + p.offset + i);
  return out;
}

TEST(BatchPlan, UnshuffledBatchesFollowTheContractAcrossShardBoundaries) {
  const std::vector<int64_t> sizes = {100, 37, 250};
  const auto paths = write_counting_shards(scratch_directory(), sizes);
  const std::vector<int64_t> starts = {0, 100, 137};
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{2, 8}, {3, 7}, {1, 50}, {4, 32}}) {
    const BatchPlan plan(paths, options(batch, seq));
    const int64_t bt = batch * seq;
    EXPECT_EQ(plan.total_tokens(), 387);
    EXPECT_EQ(plan.batches_per_epoch(), (387 - 1) / bt);
    for (int64_t k = 0; k < 2 * plan.batches_per_epoch(); ++k) {
      const int64_t s = (k % plan.batches_per_epoch()) * bt;
      EXPECT_EQ(plan.stream_offset(k), s);
      std::vector<int64_t> expected(static_cast<size_t>(bt + 1));
      std::iota(expected.begin(), expected.end(), s);
      EXPECT_EQ(covered(plan, k, starts), expected) << "B=" << batch << " T=" << seq << " batch " << k;
    }
  }
}

TEST(BatchPlan, RanksTakeTheEpochRoundRobin) {
  const auto paths = write_counting_shards(scratch_directory(), {300, 200});
  for (int world = 1; world <= 4; ++world) {
    const int64_t per_epoch = (500 - 1) / 40;
    std::set<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      const BatchPlan plan(paths, options(4, 10, rank, world));
      EXPECT_EQ(plan.batches_per_epoch(), per_epoch / world);
      for (int64_t k = 0; k < plan.batches_per_epoch(); ++k) {
        EXPECT_EQ(plan.stream_offset(k), (k * world + rank) * 40);
        EXPECT_TRUE(seen.insert(plan.stream_offset(k)).second) << "offset read twice, world " << world;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), per_epoch / world * world);
  }
}

TEST(BatchPlan, ShufflesAreSeededPermutationsPerEpoch) {
  const auto paths = write_counting_shards(scratch_directory(), {400, 300, 500});
  LoaderOptions o = options(2, 10);
  o.shuffle = true;
  o.seed = 7;
  const BatchPlan a(paths, o), b(paths, o);
  o.seed = 8;
  const BatchPlan c(paths, o);
  const int64_t n = a.batches_per_epoch();
  std::vector<int64_t> order_a, order_c;
  for (int64_t k = 0; k < 3 * n; ++k) {
    EXPECT_EQ(a.stream_offset(k), b.stream_offset(k));
    order_a.push_back(a.stream_offset(k));
    order_c.push_back(c.stream_offset(k));
  }
  EXPECT_NE(order_a, order_c);
  std::vector<int64_t> identity(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) identity[static_cast<size_t>(i)] = i * 20;
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int64_t> epoch(order_a.begin() + e * n, order_a.begin() + (e + 1) * n);
    EXPECT_NE(epoch, identity) << "epoch " << e << " is not shuffled";
    std::sort(epoch.begin(), epoch.end());
    EXPECT_EQ(epoch, identity) << "epoch " << e << " is not a permutation of the batch positions";
  }
  // Asking out of order (readers straddling an epoch boundary) gives the same answers.
  const BatchPlan d(paths, o);
  for (int64_t k : {2 * n + 1, int64_t{1}, n + 3, int64_t{0}, 2 * n + 1})
    EXPECT_EQ(d.stream_offset(k), order_c[static_cast<size_t>(k)]);
}

// Data parallelism's promise: `world` ranks with batch B read, between them, the rows of one process with
// batch world x B, in the same order, shuffled or not: rank r's k-th batch starts where row r B of the single
// process's k-th batch starts.
TEST(BatchPlan, RanksReadTheRowsOfOneProcessWithTheirBatchesTogether) {
  const auto paths = write_counting_shards(scratch_directory(), {400, 300, 517});
  for (const bool shuffle : {false, true})
    for (const int world : {2, 4}) {
      LoaderOptions one = options(2 * world, 10);
      one.shuffle = shuffle;
      one.seed = 5;
      const BatchPlan single(paths, one);
      for (int rank = 0; rank < world; ++rank) {
        LoaderOptions o = options(2, 10, rank, world);
        o.shuffle = shuffle;
        o.seed = 5;
        const BatchPlan plan(paths, o);
        ASSERT_EQ(plan.batches_per_epoch(), single.batches_per_epoch()) << "world " << world;
        for (int64_t k = 0; k < 3 * plan.batches_per_epoch(); ++k)
          ASSERT_EQ(plan.stream_offset(k), single.stream_offset(k) + rank * 2 * 10)
              << "shuffle " << shuffle << ", world " << world << ", rank " << rank << ", batch " << k;
      }
    }
}

TEST(BatchPlan, ShuffleChangesTheShardOrderEveryEpoch) {
  // One batch of all 40 tokens per epoch: its pieces list the shards in that epoch's order.
  const auto paths = write_counting_shards(scratch_directory(), {10, 10, 10, 10});
  LoaderOptions o = options(1, 39);
  o.shuffle = true;
  o.seed = 3;
  const BatchPlan plan(paths, o);
  ASSERT_EQ(plan.batches_per_epoch(), 1);
  std::set<std::vector<int>> orders;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    std::vector<int> order;
    for (const ShardPiece& p : plan.pieces(epoch)) order.push_back(p.shard);
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3})) << "epoch " << epoch;
    orders.insert(order);
  }
  EXPECT_GT(orders.size(), 2u);
}

TEST(BatchPlan, RejectsOptionsThatCannotWork) {
  const auto paths = write_counting_shards(scratch_directory(), {100});
  expect_error([&] { BatchPlan(paths, options(0, 4)); }, ErrorKind::InvalidArgument, {"positive"});
  expect_error([&] { BatchPlan(paths, options(2, 4, 2, 2)); }, ErrorKind::InvalidArgument, {"rank 2"});
  expect_error([&] { BatchPlan(paths, options(10, 10)); }, ErrorKind::InvalidArgument, {"too few", paths[0]});
  expect_error([&] { BatchPlan(paths, options(2, 20, 0, 3)); }, ErrorKind::InvalidArgument, {"3 rank(s)"});
  expect_error([&] { BatchPlan({}, options(2, 4)); }, ErrorKind::InvalidArgument, {"no shards"});
  LoaderOptions o = options(2, 4);
  o.depth = 0;
  expect_error([&] { BatchPlan(paths, o); }, ErrorKind::InvalidArgument, {"depth (0)"});
  o = options(2, 4);
  o.slow.read_latency_us = -1;
  expect_error([&] { BatchPlan(paths, o); }, ErrorKind::InvalidArgument, {"negative"});
}

TEST(BatchPlan, BadShardsAreNamed) {
  const std::string dir = scratch_directory();
  auto paths = write_counting_shards(dir, {100, 100});
  expect_error([&] { BatchPlan({paths[0], dir + "/missing.bin"}, options(2, 4)); }, ErrorKind::Io, {"missing.bin"});
  std::filesystem::resize_file(paths[1], kShardHeaderBytes + 2 * 50);
  expect_error([&] { BatchPlan(paths, options(2, 4)); }, ErrorKind::Format, {paths[1], "100 tokens"});
}

TEST(BatchPlan, TokensToBatchShiftsTargetsByOne) {
  const std::vector<uint16_t> tokens = {10, 11, 12, 13, 14, 15, 16};
  std::vector<int32_t> inputs(6), targets(6);
  tokens_to_batch(tokens.data(), 2, 3, inputs.data(), targets.data());
  EXPECT_EQ(inputs, (std::vector<int32_t>{10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(targets, (std::vector<int32_t>{11, 12, 13, 14, 15, 16}));
}

}  // namespace
}  // namespace lab
