// tokenize_to_shards: identical shards for any thread count and equal to a simple serial reference, the
// end-of-text placement, the train/val rule, the shard-size rule, cleanup of old shards, and bad options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ch05_data/tokenize/pipeline.h"
#include "tests/ch05_data/tokenize_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

using lab::testing::expect_error;
using lab::testing::scratch_directory;
using testing::concatenated;
using testing::tokenizer;

struct Corpus {
  std::vector<std::string> texts, paths;
};

Corpus write_corpus(const std::string& dir) {
  Corpus c;
  c.texts = {testing::make_corpus(10, 150), testing::make_corpus(11, 40), testing::make_corpus(12, 90)};
  for (size_t i = 0; i < c.texts.size(); ++i) {
    c.paths.push_back(dir + "/part" + std::to_string(i) + ".txt");
    write_file_atomic(c.paths.back(), c.texts[i]);
  }
  return c;
}

TokenizeOptions small_chunk_options(const Corpus& corpus, const std::string& out_prefix) {
  TokenizeOptions o;
  o.inputs = corpus.paths;
  o.doc_split = DocSplit::BlankLine;
  o.out_prefix = out_prefix;
  o.chunk_bytes = 700;  // many chunks, and long documents cut into pieces
  o.window = 3;
  o.shard_tokens = 5000;
  return o;
}

TEST(Pipeline, SameShardsForOneTwoAndThreeThreadsAndTheSerialReference) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  std::vector<TokenizeStats> runs;
  for (const int threads : {1, 2, 3}) {
    TokenizeOptions o = small_chunk_options(corpus, dir + "/t" + std::to_string(threads));
    o.threads = threads;
    runs.push_back(tokenize_to_shards(tokenizer(), o));
    EXPECT_EQ(runs.back().threads, threads);
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].train.shards.size(), runs[0].train.shards.size());
    ASSERT_EQ(runs[r].val.shards.size(), runs[0].val.shards.size());
    for (size_t s = 0; s < runs[0].train.shards.size(); ++s)
      EXPECT_EQ(read_file(runs[r].train.shards[s]), read_file(runs[0].train.shards[s])) << "train shard " << s;
    for (size_t s = 0; s < runs[0].val.shards.size(); ++s)
      EXPECT_EQ(read_file(runs[r].val.shards[s]), read_file(runs[0].val.shards[s])) << "val shard " << s;
  }
  const auto docs = testing::reference_documents(corpus.texts, DocSplit::BlankLine);
  const testing::Streams expected = testing::reference_streams(docs, true, 0.1);
  EXPECT_EQ(concatenated(runs[0].train.shards), expected.train);
  EXPECT_EQ(concatenated(runs[0].val.shards), expected.val);
  EXPECT_EQ(runs[0].train.documents + runs[0].val.documents, static_cast<int64_t>(docs.size()));
  EXPECT_EQ(runs[0].val.documents, static_cast<int64_t>(docs.size() / 10));
  int64_t bytes = 0;
  for (const auto& text : corpus.texts) bytes += static_cast<int64_t>(text.size());
  EXPECT_EQ(runs[0].bytes, bytes);
}

TEST(Pipeline, EndOfTextBeforeEveryDocument) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/a.txt", "Hello world\n\nSecond one\n\n\nThird");
  TokenizeOptions o;
  o.inputs = {dir + "/a.txt"};
  o.doc_split = DocSplit::BlankLine;
  o.val_fraction = 0;
  o.out_prefix = dir + "/eot";
  const TokenizeStats with = tokenize_to_shards(tokenizer(), o);
  const uint16_t eot = GPT2Tokenizer::kEndOfText;
  std::vector<uint16_t> expected;
  for (const char* doc : {"Hello world", "Second one", "Third"}) {
    expected.push_back(eot);
    for (const int32_t id : tokenizer().encode(doc)) expected.push_back(static_cast<uint16_t>(id));
  }
  ASSERT_EQ(std::vector<uint16_t>(expected.begin(), expected.begin() + 4),
            (std::vector<uint16_t>{eot, 15496, 995, eot}));
  EXPECT_EQ(concatenated(with.train.shards), expected);
  EXPECT_TRUE(with.val.shards.empty());

  o.eot = false;
  o.out_prefix = dir + "/no_eot";
  const std::vector<uint16_t> without = concatenated(tokenize_to_shards(tokenizer(), o).train.shards);
  expected.erase(std::remove(expected.begin(), expected.end(), eot), expected.end());
  EXPECT_EQ(without, expected);
}

TEST(Pipeline, ValSplitRule) {
  std::vector<int64_t> val;
  for (int64_t i = 0; i < 100; ++i)
    if (is_val_document(i, 0.1)) val.push_back(i);
  EXPECT_EQ(val, (std::vector<int64_t>{9, 19, 29, 39, 49, 59, 69, 79, 89, 99}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(is_val_document(i, 0.25), i % 4 == 3) << i;
  for (int64_t i = 0; i < 1000; ++i) EXPECT_FALSE(is_val_document(i, 0.0));
  // Exactly floor(n * F) of the first n documents, for any n.
  for (const double f : {0.01, 0.1, 1.0 / 3, 0.5, 0.9}) {
    int64_t count = 0;
    for (int64_t n = 1; n <= 5000; ++n) {
      count += is_val_document(n - 1, f) ? 1 : 0;
      ASSERT_EQ(count, static_cast<int64_t>(std::floor(static_cast<double>(n) * f))) << "F=" << f << " n=" << n;
    }
  }
}

TEST(Pipeline, ShardSizeRule) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  TokenizeOptions o = small_chunk_options(corpus, dir + "/sized");
  o.shard_tokens = 500;
  const TokenizeStats stats = tokenize_to_shards(tokenizer(), o);
  for (const SplitStats* split : {&stats.train, &stats.val}) {
    ASSERT_GE(split->shards.size(), 2u);
    int64_t total = 0;
    for (size_t s = 0; s < split->shards.size(); ++s) {
      const int64_t n = read_shard_info(split->shards[s]).num_tokens;
      if (s + 1 < split->shards.size())
        EXPECT_EQ(n, 500) << split->shards[s];
      else
        EXPECT_TRUE(n >= 1 && n <= 500) << split->shards[s] << " holds " << n;
      total += n;
    }
    EXPECT_EQ(total, split->tokens);
  }
  EXPECT_EQ(stats.train.shards[0], dir + "/sized_train_000000.bin");
  EXPECT_EQ(stats.train.shards[1], dir + "/sized_train_000001.bin");
  EXPECT_EQ(stats.val.shards[0], dir + "/sized_val_000000.bin");
  EXPECT_EQ(expand_shard_pattern(dir + "/sized_train_*.bin"), stats.train.shards);
}

TEST(Pipeline, RerunRemovesShardsOfAnEarlierRun) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  TokenizeOptions o = small_chunk_options(corpus, dir + "/again");
  o.shard_tokens = 1000;
  ASSERT_GT(tokenize_to_shards(tokenizer(), o).train.shards.size(), 3u);
  write_file_atomic(dir + "/again_train_notes.bin", "not a shard of ours");
  o.shard_tokens = 1 << 30;
  const TokenizeStats stats = tokenize_to_shards(tokenizer(), o);
  EXPECT_EQ(expand_shard_pattern(dir + "/again_train_0*.bin"), stats.train.shards);
  EXPECT_EQ(stats.train.shards.size(), 1u);
  EXPECT_TRUE(file_exists(dir + "/again_train_notes.bin"));  // only names of the shard pattern are removed
}

TEST(Pipeline, CountOnlyWritesNothing) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  TokenizeOptions o = small_chunk_options(corpus, "");
  const TokenizeStats stats = tokenize_to_shards(tokenizer(), o);
  const testing::Streams expected =
      testing::reference_streams(testing::reference_documents(corpus.texts, DocSplit::BlankLine), true, 0.1);
  EXPECT_EQ(stats.train.tokens, static_cast<int64_t>(expected.train.size()));
  EXPECT_EQ(stats.val.tokens, static_cast<int64_t>(expected.val.size()));
  EXPECT_TRUE(stats.train.shards.empty());
}

TEST(Pipeline, BadOptionsAreClearErrors) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  TokenizeOptions o = small_chunk_options(corpus, dir + "/bad");
  o.val_fraction = 1.0;
  expect_error([&] { tokenize_to_shards(tokenizer(), o); }, ErrorKind::InvalidArgument, {"val fraction"});
  o.val_fraction = 0.1;
  o.shard_tokens = 0;
  expect_error([&] { tokenize_to_shards(tokenizer(), o); }, ErrorKind::InvalidArgument, {"shard size"});
  o.shard_tokens = 100;
  o.inputs.push_back(dir + "/absent.txt");
  expect_error([&] { tokenize_to_shards(tokenizer(), o); }, ErrorKind::Io, {dir + "/absent.txt"});
  o.inputs.pop_back();
  o.out_prefix = corpus.paths[0] + "/sub/out";  // a directory below a regular file cannot be created
  expect_error([&] { tokenize_to_shards(tokenizer(), o); }, ErrorKind::Io, {corpus.paths[0] + "/sub"});
  o.out_prefix = dir + "/";
  expect_error([&] { tokenize_to_shards(tokenizer(), o); }, ErrorKind::InvalidArgument, {"names a directory"});
}

TEST(Pipeline, ExpandInputs) {
  const std::string dir = scratch_directory();
  const Corpus corpus = write_corpus(dir);
  EXPECT_EQ(expand_inputs(dir + "/part*.txt"), corpus.paths);
  EXPECT_EQ(expand_inputs(corpus.paths[2] + "," + dir + "/part[01].txt"),
            (std::vector<std::string>{corpus.paths[2], corpus.paths[0], corpus.paths[1]}));
  expect_error([&] { expand_inputs(dir + "/none*.txt"); }, ErrorKind::Io, {dir + "/none*.txt"});
  expect_error([&] { expand_inputs(dir + "/absent.txt"); }, ErrorKind::Io, {dir + "/absent.txt"});
  expect_error([&] { expand_inputs(corpus.paths[0] + ","); }, ErrorKind::InvalidArgument, {"empty entry"});
}

}  // namespace
}  // namespace lab::ch05
