// Token shards: the round trip, positioned reads, glob expansion, and one clear error (naming the file)
// for every kind of damaged shard.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/io/files.h"
#include "common/io/shards.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::scratch_directory;

std::vector<uint16_t> sample_tokens(size_t n) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>((i * 7919 + 13) % 50257);
  return tokens;
}

// The bytes of a valid shard holding `tokens`, to damage by hand.
std::string shard_bytes(const std::vector<uint16_t>& tokens) {
  std::string bytes(kShardHeaderBytes + 2 * tokens.size(), '\0');
  const int32_t header[3] = {kShardMagic, kShardVersion, static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof(header));
  std::memcpy(bytes.data() + kShardHeaderBytes, tokens.data(), 2 * tokens.size());
  return bytes;
}

void set_header_int(std::string& bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, sizeof(value));
}

TEST(Shards, RoundTrip) {
  const std::string path = scratch_directory() + "/tiny_train_000000.bin";
  const std::vector<uint16_t> tokens = sample_tokens(1000);
  write_shard(path, tokens);
  EXPECT_EQ(file_size(path), kShardHeaderBytes + 2000);
  EXPECT_EQ(read_shard_info(path).num_tokens, 1000);
  EXPECT_EQ(read_shard_info(path).path, path);
  EXPECT_EQ(read_shard(path), tokens);
  EXPECT_EQ(read_file(path), shard_bytes(tokens));  // exactly the llm.c layout
}

TEST(Shards, EmptyShardRoundTrips) {
  const std::string path = scratch_directory() + "/empty.bin";
  write_shard(path, {});
  EXPECT_EQ(read_shard_info(path).num_tokens, 0);
  EXPECT_TRUE(read_shard(path).empty());
}

TEST(Shards, OverwriteLeavesNoTemporaryFile) {
  const std::string dir = scratch_directory();
  write_shard(dir + "/a.bin", sample_tokens(10));
  write_shard(dir + "/a.bin", sample_tokens(20));
  EXPECT_EQ(read_shard(dir + "/a.bin"), sample_tokens(20));
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Shards, PositionedReads) {
  const std::string path = scratch_directory() + "/s.bin";
  const std::vector<uint16_t> tokens = sample_tokens(500);
  write_shard(path, tokens);
  std::vector<uint16_t> part(100);
  read_shard_tokens(path, 250, 100, part.data());
  EXPECT_EQ(part, std::vector<uint16_t>(tokens.begin() + 250, tokens.begin() + 350));
  read_shard_tokens(path, 400, 100, part.data());  // up to the very end
  EXPECT_EQ(part, std::vector<uint16_t>(tokens.begin() + 400, tokens.end()));
  read_shard_tokens(path, 500, 0, part.data());  // an empty read at the end is fine
}

TEST(Shards, ReadsPastTheEndNameTheFile) {
  const std::string path = scratch_directory() + "/s.bin";
  write_shard(path, sample_tokens(500));
  std::vector<uint16_t> out(600);
  expect_error([&] { read_shard_tokens(path, 450, 51, out.data()); }, ErrorKind::Format, {path, "offset 450"});
  expect_error([&] { read_shard_tokens(path, 501, 0, out.data()); }, ErrorKind::Format, {path});
  expect_error([&] { read_shard_tokens(path, -1, 10, out.data()); }, ErrorKind::Format, {path});
  expect_error([&] { read_shard_tokens(path, 0, -1, out.data()); }, ErrorKind::Format, {path});
}

TEST(Shards, MissingFileIsAnIoError) {
  const std::string path = scratch_directory() + "/absent.bin";
  expect_error([&] { read_shard_info(path); }, ErrorKind::Io, {path});
  expect_error([&] { read_shard(path); }, ErrorKind::Io, {path});
}

TEST(Shards, TruncatedHeader) {
  const std::string path = scratch_directory() + "/short.bin";
  write_file_atomic(path, shard_bytes(sample_tokens(10)).substr(0, 100));
  expect_error([&] { read_shard_info(path); }, ErrorKind::Format, {path, "100 bytes", "header"});
}

TEST(Shards, TruncatedBody) {
  const std::string path = scratch_directory() + "/cut.bin";
  const std::string bytes = shard_bytes(sample_tokens(10));
  write_file_atomic(path, bytes.substr(0, bytes.size() - 3));
  expect_error([&] { read_shard(path); }, ErrorKind::Format, {path, "10 tokens"});
}

TEST(Shards, ExtraBytes) {
  const std::string path = scratch_directory() + "/long.bin";
  write_file_atomic(path, shard_bytes(sample_tokens(10)) + "xx");
  expect_error([&] { read_shard_info(path); }, ErrorKind::Format, {path, "10 tokens"});
}

TEST(Shards, WrongMagic) {
  const std::string path = scratch_directory() + "/magic.bin";
  std::string bytes = shard_bytes(sample_tokens(10));
  set_header_int(bytes, 0, 20240521);
  write_file_atomic(path, bytes);
  expect_error([&] { read_shard(path); }, ErrorKind::Format, {path, "magic", "20240521"});
}

TEST(Shards, ATextFileIsNamedAsTextWithTheCommandThatTokenizesIt) {
  const std::string dir = scratch_directory();
  // Longer than a header, and shorter: both are text, not a shard of the wrong size.
  std::string long_text;
  while (long_text.size() < 3000) long_text += "First Citizen:\r\nBefore we proceed any further, hear me speak.\n\t";
  for (const std::string& text : {long_text, std::string("Caf\xc3\xa9 au lait\n")}) {
    const std::string path = dir + "/my_" + std::to_string(text.size()) + ".txt";
    write_file_atomic(path, text);
    expect_error([&] { read_shard_info(path); }, ErrorKind::Format, {path, "looks like text", "gpt2_tokenize --input"});
  }
  // Binary that is not a shard keeps the plain message.
  const std::string binary = dir + "/zeros.bin";
  write_file_atomic(binary, std::string(2048, '\0'));
  expect_error([&] { read_shard_info(binary); }, ErrorKind::Format, {binary, "bad magic 0"});
}

TEST(Shards, WrongVersion) {
  const std::string path = scratch_directory() + "/version.bin";
  std::string bytes = shard_bytes(sample_tokens(10));
  set_header_int(bytes, 1, 2);
  write_file_atomic(path, bytes);
  expect_error([&] { read_shard(path); }, ErrorKind::Format, {path, "version 2"});
}

TEST(Shards, NegativeCount) {
  const std::string path = scratch_directory() + "/negative.bin";
  std::string bytes = shard_bytes(sample_tokens(10));
  set_header_int(bytes, 2, -5);
  write_file_atomic(path, bytes);
  expect_error([&] { read_shard_info(path); }, ErrorKind::Format, {path, "-5"});
}

TEST(Shards, ExpandPatternSortsAndSkipsDirectories) {
  const std::string dir = scratch_directory();
  for (const char* name : {"x_train_000002.bin", "x_train_000000.bin", "x_train_000001.bin", "x_val_000000.bin"})
    write_shard(dir + "/" + name, sample_tokens(3));
  std::filesystem::create_directories(dir + "/x_train_999999.bin");
  EXPECT_EQ(expand_shard_pattern(dir + "/x_train_*.bin"),
            (std::vector<std::string>{dir + "/x_train_000000.bin", dir + "/x_train_000001.bin",
                                      dir + "/x_train_000002.bin"}));
  EXPECT_EQ(expand_shard_pattern(dir + "/x_val_000000.bin"), (std::vector<std::string>{dir + "/x_val_000000.bin"}));
}

TEST(Shards, ExpandPatternWithNoMatchNamesThePattern) {
  const std::string pattern = scratch_directory() + "/nothing_*.bin";
  expect_error([&] { expand_shard_pattern(pattern); }, ErrorKind::Io, {pattern});
}

}  // namespace
}  // namespace lab
