// prepare_tinyshakespeare / prepare_dataset: the first call tokenizes (and says so in one line), later calls
// reuse the cache untouched, and a changed setting, input or damaged shard makes it tokenize again.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ch05_data/tokenize/prepare.h"
#include "common/util/json.h"
#include "tests/ch05_data/tokenize_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

using lab::testing::scratch_directory;
using testing::concatenated;

// Runs `body` and returns what it printed on stdout.
template <typename Body>
std::string stdout_of(Body&& body) {
  ::testing::internal::CaptureStdout();
  body();
  return ::testing::internal::GetCapturedStdout();
}

// Replaces a shard by one of the same length holding only zeros: still valid, but not what tokenizing
// writes, so it shows whether a later call tokenized again.
void plant_marker(const std::string& shard) {
  write_shard(shard, std::vector<uint16_t>(read_shard_info(shard).num_tokens, 0));
}

bool has_marker(const std::string& shard) {
  const std::vector<uint16_t> tokens = read_shard(shard);
  return std::all_of(tokens.begin(), tokens.end(), [](uint16_t t) { return t == 0; });
}

TEST(Prepare, TinyShakespeareIsTokenizedOnceThenReused) {
  const std::string cache = scratch_directory() + "/cache";
  DatasetFiles files;
  const std::string first = stdout_of([&] { files = prepare_tinyshakespeare(cache); });
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 1) << first;
  EXPECT_NE(first.find("tokenized"), std::string::npos) << first;
  EXPECT_EQ(files.train_pattern, cache + "/tinyshakespeare_train_*.bin");
  EXPECT_EQ(files.val_pattern, cache + "/tinyshakespeare_val_*.bin");

  // The shards hold the corpus split at empty lines, end-of-text before each document, every tenth to val.
  const std::string text = read_file(bundled_data_path("tinyshakespeare.txt"));
  const auto docs = testing::reference_documents({text}, DocSplit::BlankLine);
  EXPECT_EQ(docs.size(), 7222u);
  const testing::Streams expected = testing::reference_streams(docs, true, 0.1);
  EXPECT_EQ(concatenated(expand_shard_pattern(files.train_pattern)), expected.train);
  EXPECT_EQ(concatenated(expand_shard_pattern(files.val_pattern)), expected.val);

  const std::string train_shard = expand_shard_pattern(files.train_pattern)[0];
  plant_marker(train_shard);
  DatasetFiles again;
  EXPECT_EQ(stdout_of([&] { again = prepare_tinyshakespeare(cache); }), "");
  EXPECT_TRUE(has_marker(train_shard)) << "the cached shards were rewritten";
  EXPECT_EQ(again.train_pattern, files.train_pattern);
  EXPECT_EQ(again.val_pattern, files.val_pattern);
}

TEST(Prepare, ChangedSettingInTheManifestTokenizesAgain) {
  const std::string cache = scratch_directory();
  const DatasetFiles files = prepare_tinyshakespeare(cache);
  const std::string train_shard = expand_shard_pattern(files.train_pattern)[0];
  plant_marker(train_shard);

  // As if an earlier version had tokenized with another val fraction.
  const std::string manifest_path = cache + "/tinyshakespeare.manifest.json";
  Json manifest = Json::parse(read_file(manifest_path));
  Json settings = manifest.at("settings");
  settings.set("val_fraction", 0.2);
  manifest.set("settings", settings);
  write_file_atomic(manifest_path, manifest.dump(2));

  const std::string printed = stdout_of([&] { prepare_tinyshakespeare(cache); });
  EXPECT_NE(printed.find("tokenized"), std::string::npos);
  EXPECT_FALSE(has_marker(train_shard));
  EXPECT_EQ(stdout_of([&] { prepare_tinyshakespeare(cache); }), "");  // and the new manifest is reused
}

TEST(Prepare, ChangedInputOrSettingsOrDamagedShardTokenizeAgain) {
  const std::string dir = scratch_directory();
  DatasetSpec spec;
  spec.name = "small";
  spec.input = dir + "/small.txt";
  spec.shard_tokens = 50;
  write_file_atomic(spec.input, testing::make_corpus(5, 30));
  const auto tokenizes = [&] { return !stdout_of([&] { prepare_dataset(spec, dir); }).empty(); };

  EXPECT_TRUE(tokenizes());
  EXPECT_FALSE(tokenizes());

  std::string text = read_file(spec.input);  // same size, different content
  text[text.size() / 2] = text[text.size() / 2] == 'a' ? 'b' : 'a';
  write_file_atomic(spec.input, text);
  EXPECT_TRUE(tokenizes());
  EXPECT_FALSE(tokenizes());

  spec.eot = false;
  EXPECT_TRUE(tokenizes());
  spec.shard_tokens = 70;
  EXPECT_TRUE(tokenizes());
  EXPECT_FALSE(tokenizes());

  const std::string shard = dir + "/small_train_000001.bin";
  write_file_atomic(shard, read_file(shard).substr(0, 1030));  // truncated
  EXPECT_TRUE(tokenizes());
  EXPECT_EQ(read_shard_info(shard).num_tokens, 70);

  std::filesystem::remove(dir + "/small_val_000000.bin");
  EXPECT_TRUE(tokenizes());
  EXPECT_FALSE(tokenizes());
}

TEST(Prepare, MissingInputIsAnIoError) {
  DatasetSpec spec;
  spec.name = "absent";
  spec.input = scratch_directory() + "/absent.txt";
  lab::testing::expect_error([&] { prepare_dataset(spec, scratch_directory()); }, ErrorKind::Io, {spec.input});
}

}  // namespace
}  // namespace lab::ch05
