// Chapter 5's loaders, every stage against the same expectations: the batch contract's tokens (several
// B x T, batches across shard boundaries), disjoint and complete coverage by ranks, exact resume (also
// while a prefetch queue is full), seeded shuffling, errors naming the shard (also from reader threads),
// epoch reports, clean destruction, and the pinned stage's fallback where it cannot run.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "ch05_data/loaders/make_loader.h"
#include "ch05_data/loaders/prefetch_loader.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/data/shard_fixtures.h"
#include "tests/common/expect_error.h"
#ifdef LAB_WITH_CUDA
#include "ch05_data/loaders/pinned_loader.h"
#endif

namespace lab::ch05 {
namespace {

using lab::testing::counting_batch;
using lab::testing::expect_error;
using lab::testing::scratch_directory;
using lab::testing::write_counting_shards;

LoaderOptions options(int64_t batch, int64_t seq) {
  LoaderOptions o;
  o.batch = batch;
  o.seq = seq;
  o.depth = 3;
  o.workers = 2;
  o.log = [](const std::string&) {};
  return o;
}

// Batch tensors as host ints, whatever device the loader fills.
struct HostBatch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const HostBatch&) const = default;
};
HostBatch next_batch(BatchLoader& loader) {
  Tensor x, y;
  loader.next(x, y);
  EXPECT_EQ(x.device(), loader.device());
  EXPECT_EQ(x.shape(), (Shape{loader.plan().options().batch, loader.plan().options().seq}));
  EXPECT_EQ(x.dtype(), DType::I32);
  return {x.to_ints(), y.to_ints()};
}

// Batches read ahead and waiting, for the background stages; nullopt for the others.
std::optional<int64_t> ready_batches(const BatchLoader& loader) {
  if (const auto* p = dynamic_cast<const PrefetchLoader*>(&loader)) return p->ready();
#ifdef LAB_WITH_CUDA
  if (const auto* p = dynamic_cast<const PinnedLoader*>(&loader)) return p->ready();
#endif
  return std::nullopt;
}

// Waits until the readers have filled the queue (a guard against hanging, not a timing check).
void wait_until_full(const BatchLoader& loader, int64_t depth) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (*ready_batches(loader) < depth) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the readers never filled the queue";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The device the stage is meant for: the GPU when there is one (the pinned stage needs it), else the CPU.
Device target_device() {
  return cuda_available() ? Device::cuda(0) : Device::cpu();
}

class EveryStage : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<BatchLoader> make(const std::vector<std::string>& paths, const LoaderOptions& o) const {
    return make_loader(GetParam(), paths, o, target_device());
  }
};

INSTANTIATE_TEST_SUITE_P(Loaders, EveryStage, ::testing::ValuesIn(loader_stages()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(EveryStage, HandsOutTheContractBatchesAcrossShardBoundaries) {
  const auto paths = write_counting_shards(scratch_directory(), {130, 17, 260, 61});
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 8}, {3, 7}, {4, 16}, {1, 200}}) {
    const auto loader = make(paths, options(batch, seq));
    const int64_t per_epoch = (468 - 1) / (batch * seq);
    ASSERT_EQ(loader->plan().batches_per_epoch(), per_epoch);
    for (int64_t k = 0; k < per_epoch + 3; ++k) {  // into the second epoch
      const auto ref = counting_batch((k % per_epoch) * batch * seq, batch, seq);
      const HostBatch got = next_batch(*loader);
      ASSERT_EQ(got.inputs, ref.inputs) << "B=" << batch << " T=" << seq << " batch " << k;
      ASSERT_EQ(got.targets, ref.targets) << "B=" << batch << " T=" << seq << " batch " << k;
    }
  }
}

TEST_P(EveryStage, RanksReadDisjointBatchesThatCoverTheEpoch) {
  const auto paths = write_counting_shards(scratch_directory(), {500, 333});
  for (int world = 1; world <= 4; ++world) {
    const int64_t per_epoch = (833 - 1) / 30;
    std::set<int32_t> starts;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o = options(3, 10);
      o.rank = rank;
      o.world = world;
      const auto loader = make(paths, o);
      for (int64_t k = 0; k < loader->plan().batches_per_epoch(); ++k) {
        const HostBatch got = next_batch(*loader);
        EXPECT_EQ(got.inputs, counting_batch((k * world + rank) * 30, 3, 10).inputs);
        EXPECT_TRUE(starts.insert(got.inputs[0]).second)
            << "world " << world << ": batch at " << got.inputs[0] << " read by two ranks";
      }
    }
    EXPECT_EQ(static_cast<int64_t>(starts.size()), per_epoch / world * world) << "world " << world;
    EXPECT_EQ(*starts.rbegin(), (per_epoch / world * world - 1) * 30) << "world " << world;
  }
}

TEST_P(EveryStage, SeekEqualsConsumingThatManyBatches) {
  const auto paths = write_counting_shards(scratch_directory(), {300, 211});
  for (const bool shuffle : {false, true}) {
    LoaderOptions o = options(2, 9);
    o.shuffle = shuffle;
    o.seed = 42;
    const auto reference = make(paths, o);
    const int64_t n = reference->plan().batches_per_epoch();
    std::vector<HostBatch> batches;
    for (int64_t i = 0; i < 3 * n; ++i) batches.push_back(next_batch(*reference));
    const auto resumed = make(paths, o);
    for (int64_t k : {int64_t{0}, int64_t{4}, n - 1, n, n + 5, 2 * n + 2, int64_t{1}}) {
      resumed->seek(k);
      EXPECT_EQ(resumed->position(), k);
      for (int64_t i = k; i < k + 4; ++i)
        ASSERT_EQ(next_batch(*resumed), batches[static_cast<size_t>(i)])
            << "shuffle " << shuffle << ", seek to " << k << ", batch " << i;
    }
    expect_error([&] { resumed->seek(-2); }, ErrorKind::InvalidArgument, {"-2"});
  }
}

TEST_P(EveryStage, SeekDiscardsAFullPrefetchQueue) {
  const auto paths = write_counting_shards(scratch_directory(), {400});
  const LoaderOptions o = options(2, 10);
  const auto loader = make(paths, o);
  for (int i = 0; i < 3; ++i) next_batch(*loader);
  if (ready_batches(*loader)) wait_until_full(*loader, o.depth);
  loader->seek(11);
  EXPECT_EQ(next_batch(*loader).inputs, counting_batch(11 * 20, 2, 10).inputs);
  if (ready_batches(*loader)) wait_until_full(*loader, o.depth);
  loader->seek(1);
  EXPECT_EQ(next_batch(*loader).inputs, counting_batch(20, 2, 10).inputs);
  EXPECT_EQ(next_batch(*loader).inputs, counting_batch(40, 2, 10).inputs);
}

TEST_P(EveryStage, ShufflingIsSeededAndEachEpochIsAPermutation) {
  const auto paths = write_counting_shards(scratch_directory(), {250, 190, 310});
  auto order = [&](uint64_t seed, int64_t epochs) {
    LoaderOptions o = options(2, 10);
    o.shuffle = true;
    o.seed = seed;
    const auto loader = make(paths, o);
    std::vector<int32_t> starts;
    for (int64_t i = 0; i < epochs * loader->plan().batches_per_epoch(); ++i) {
      starts.push_back(next_batch(*loader).inputs[0]);  // distinct tokens: the first one names the batch
    }
    return starts;
  };
  const int64_t n = (750 - 1) / 20;
  const std::vector<int32_t> a = order(5, 3);
  EXPECT_EQ(a, order(5, 3));
  EXPECT_NE(a, order(6, 3));
  for (int64_t e = 0; e < 3; ++e) {
    const std::set<int32_t> epoch(a.begin() + e * n, a.begin() + (e + 1) * n);
    EXPECT_EQ(static_cast<int64_t>(epoch.size()), n) << "epoch " << e << " repeats a batch";
  }
  EXPECT_NE(std::vector<int32_t>(a.begin(), a.begin() + n), std::vector<int32_t>(a.begin() + n, a.begin() + 2 * n));
}

TEST_P(EveryStage, BadShardsFailAtOpenNamingTheFile) {
  const std::string dir = scratch_directory();
  const auto paths = write_counting_shards(dir, {100, 100});
  const std::string missing = dir + "/missing_000000.bin";
  expect_error([&] { make({paths[0], missing}, options(2, 4)); }, ErrorKind::Io, {missing});
  const std::string truncated = dir + "/truncated.bin";
  std::filesystem::copy_file(paths[1], truncated);
  std::filesystem::resize_file(truncated, kShardHeaderBytes + 2 * 60 + 1);
  expect_error([&] { make({paths[0], truncated}, options(2, 4)); }, ErrorKind::Format, {truncated});
  const std::string garbage = dir + "/garbage.bin";
  // Binary garbage (a text file gets its own message, common/io's tests).
  std::ofstream(garbage) << std::string(kShardHeaderBytes + 10, '\x07');
  expect_error([&] { make({garbage}, options(2, 4)); }, ErrorKind::Format, {garbage, "magic"});
  expect_error([&] { make_loader("turbo", paths, options(2, 4), Device::cpu()); }, ErrorKind::InvalidArgument,
               {"turbo", "sync, mmap, prefetch or pinned"});
}

// A shard that shrinks after the loader opened it: the batch that needs the lost tokens fails with the
// original error naming the file (raised on a reader thread for the background stages), the position
// stays, asking again fails again, and a seek back to good data recovers.
TEST_P(EveryStage, AShardShrinkingWhileOpenFailsTheBatchThatNeedsIt) {
  const auto paths = write_counting_shards(scratch_directory(), {200, 200});
  const auto loader = make(paths, options(2, 10));  // shard 1 starts in batch 9; readers are at most 3 ahead
  std::filesystem::resize_file(paths[1], kShardHeaderBytes);
  for (int64_t k = 0; k < 9; ++k) ASSERT_EQ(next_batch(*loader).inputs, counting_batch(k * 20, 2, 10).inputs);
  Tensor x, y;
  for (int attempt = 0; attempt < 2; ++attempt) {
    expect_error([&] { loader->next(x, y); }, ErrorKind::Io, {paths[1]});
    EXPECT_EQ(loader->position(), 9);
  }
  loader->seek(2);
  EXPECT_EQ(next_batch(*loader).inputs, counting_batch(40, 2, 10).inputs);
}

TEST_P(EveryStage, ReportsEachNewEpochOnce) {
  const auto paths = write_counting_shards(scratch_directory(), {101});
  std::vector<std::string> log;
  LoaderOptions o = options(2, 10);  // 5 batches per epoch
  o.log = [&log](const std::string& line) { log.push_back(line); };
  const auto loader = make(paths, o);
  for (int i = 0; i < 11; ++i) next_batch(*loader);
  std::vector<std::string> epochs;
  for (const std::string& line : log)
    if (line.find("epoch") != std::string::npos) epochs.push_back(line);
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_NE(epochs[0].find("epoch 1 begins at batch 5"), std::string::npos) << epochs[0];
  EXPECT_NE(epochs[1].find("epoch 2 begins at batch 10"), std::string::npos) << epochs[1];
}

TEST_P(EveryStage, DestructionStopsBusyReaders) {
  const auto paths = write_counting_shards(scratch_directory(), {400});
  LoaderOptions o = options(2, 10);
  o.slow.read_latency_us = 2000;
  o.slow.preprocess_us = 200;
  make(paths, o).reset();  // readers in the middle of their first batches
  const auto loader = make(paths, o);
  next_batch(*loader);
  if (ready_batches(*loader)) wait_until_full(*loader, o.depth);
  EXPECT_EQ(next_batch(*loader).inputs, counting_batch(20, 2, 10).inputs);
}  // destroyed with a full queue

TEST(PinnedLoader, FallsBackToPrefetchWithOneMessageWhereItCannotRun) {
  const auto paths = write_counting_shards(scratch_directory(), {100});
  std::vector<std::string> log;
  LoaderOptions o = options(2, 4);
  o.log = [&log](const std::string& line) { log.push_back(line); };
  const auto on_cpu = make_loader("pinned", paths, o, Device::cpu());
  EXPECT_EQ(on_cpu->name(), "prefetch");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("pinned loader cannot run"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("using the prefetch loader"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("for cpu"), std::string::npos) << log[0];
#ifndef LAB_WITH_CUDA
  log.clear();
  EXPECT_EQ(make_loader("pinned", paths, o, Device::cuda(0))->name(), "prefetch");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("this build has no CUDA backend"), std::string::npos) << log[0];
#else
  if (!cuda_available()) {
    log.clear();
    EXPECT_EQ(make_loader("pinned", paths, o, Device::cuda(0))->name(), "prefetch");
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find("no CUDA GPU is visible"), std::string::npos) << log[0];
  }
#endif
}

TEST(PinnedLoader, RunsOnTheGpuWhereThereIsOne) {
  LAB_REQUIRE_GPU();
  const auto paths = write_counting_shards(scratch_directory(), {300, 77});
  const auto loader = make_loader("pinned", paths, options(3, 8), Device::cuda(0));
  EXPECT_EQ(loader->name(), "pinned");
  EXPECT_EQ(loader->device(), Device::cuda(0));
  for (int64_t k = 0; k < 20; ++k) {
    const auto ref = counting_batch((k % 15) * 24, 3, 8);
    const HostBatch got = next_batch(*loader);
    EXPECT_EQ(got.inputs, ref.inputs) << "batch " << k;
    EXPECT_EQ(got.targets, ref.targets) << "batch " << k;
  }
}

}  // namespace
}  // namespace lab::ch05
