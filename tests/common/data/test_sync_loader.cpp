// SyncLoader and what every loader inherits from BatchLoader: the contract's tokens, seek, the report
// of each new epoch, errors naming the shard, and the simulated slow source paid on the caller's thread.
#include <gtest/gtest.h>
#include <time.h>

#include <filesystem>
#include <fstream>

#include "common/data/loader.h"
#include "tests/common/data/shard_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::counting_batch;
using testing::expect_error;
using testing::scratch_directory;
using testing::write_counting_shards;

LoaderOptions options(int64_t batch, int64_t seq, std::vector<std::string>* log = nullptr) {
  LoaderOptions o;
  o.batch = batch;
  o.seq = seq;
  if (log) o.log = [log](const std::string& line) { log->push_back(line); };
  return o;
}

TEST(SyncLoader, HandsOutTheContractBatches) {
  const auto paths = write_counting_shards(scratch_directory(), {90, 45, 120});
  SyncLoader loader(paths, options(3, 8));
  EXPECT_EQ(loader.name(), "sync");
  EXPECT_EQ(loader.device(), Device::cpu());
  Tensor x, y;
  for (int64_t k = 0; k < 2 * loader.plan().batches_per_epoch(); ++k) {
    EXPECT_EQ(loader.position(), k);
    loader.next(x, y);
    EXPECT_EQ(x.shape(), (Shape{3, 8}));
    EXPECT_EQ(x.dtype(), DType::I32);
    const auto ref = counting_batch((k % loader.plan().batches_per_epoch()) * 24, 3, 8);
    EXPECT_EQ(x.to_ints(), ref.inputs) << "batch " << k;
    EXPECT_EQ(y.to_ints(), ref.targets) << "batch " << k;
  }
}

TEST(SyncLoader, SeekContinuesExactly) {
  const auto paths = write_counting_shards(scratch_directory(), {200, 100});
  LoaderOptions o = options(2, 5);
  o.shuffle = true;
  o.seed = 11;
  SyncLoader reference(paths, o), resumed(paths, o);
  Tensor x, y, rx, ry;
  std::vector<std::vector<int32_t>> batches;
  for (int i = 0; i < 70; ++i) {
    reference.next(x, y);
    batches.push_back(x.to_ints());
  }
  for (int64_t k : {0, 5, 29, 30, 31, 61}) {
    resumed.seek(k);
    for (int64_t i = k; i < k + 5; ++i) {
      resumed.next(rx, ry);
      EXPECT_EQ(rx.to_ints(), batches[static_cast<size_t>(i)]) << "seek to " << k << ", batch " << i;
    }
    EXPECT_EQ(resumed.position(), k + 5);
  }
  expect_error([&] { resumed.seek(-1); }, ErrorKind::InvalidArgument, {"-1"});
}

TEST(SyncLoader, ReportsEachNewEpochOnce) {
  const auto paths = write_counting_shards(scratch_directory(), {101});
  std::vector<std::string> log;
  SyncLoader loader(paths, options(2, 10, &log));  // 5 batches per epoch
  Tensor x, y;
  for (int i = 0; i < 12; ++i) loader.next(x, y);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[0].find("epoch 1 begins at batch 5"), std::string::npos) << log[0];
  EXPECT_NE(log[1].find("epoch 2 begins at batch 10"), std::string::npos) << log[1];
  loader.seek(7);  // mid-epoch: nothing begins here
  loader.next(x, y);
  EXPECT_EQ(log.size(), 2u);
}

TEST(SyncLoader, ShardErrorsNameTheFile) {
  const std::string dir = scratch_directory();
  const auto paths = write_counting_shards(dir, {100, 100});
  const std::vector<std::string> with_garbage = {paths[0], dir + "/garbage.bin"};
  std::ofstream(with_garbage[1]) << std::string(2000, '\x07');  // binary garbage (text has its own message)
  expect_error([&] { SyncLoader(with_garbage, options(2, 4)); }, ErrorKind::Format, {"garbage.bin", "magic"});
  // Shrunk after the loader opened it: the batch that needs the missing tokens fails, naming the file,
  // and the position stays where it was.
  SyncLoader loader(paths, options(2, 10));
  std::filesystem::resize_file(paths[1], kShardHeaderBytes);
  Tensor x, y;
  for (int i = 0; i < 4; ++i) loader.next(x, y);
  expect_error([&] { loader.next(x, y); }, ErrorKind::Io, {paths[1]});
  EXPECT_EQ(loader.position(), 4);
}

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

TEST(SlowSource, BurnsAtLeastTheCpuTimeAskedOnTheCallingThread) {
  const auto paths = write_counting_shards(scratch_directory(), {100});
  LoaderOptions o = options(2, 4);
  o.slow.preprocess_us = 3000;
  SyncLoader loader(paths, o);
  Tensor x, y;
  const double before = thread_cpu_us();
  for (int i = 0; i < 3; ++i) loader.next(x, y);
  EXPECT_GE(thread_cpu_us() - before, 3 * 3000.0);
  EXPECT_FALSE(SlowSource{}.active());
  EXPECT_TRUE((SlowSource{1, 0}).active());
}

}  // namespace
}  // namespace lab
