// The gpt2_tokenize executable end to end: --print-ids, a full run, and one error line for bad flags.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ch05_data/tokenize/shard_writer.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "tests/ch05_data/tokenize_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

using lab::testing::scratch_directory;

const std::string kBinary = LAB_BINARY_DIR "/bin/gpt2_tokenize";

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs a shell command line and collects its stdout (add 2>&1 to the command to collect stderr too).
CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

TEST(Gpt2TokenizeCli, PrintIds) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/hello.txt", "Hello world");
  CommandResult r = run_command(kBinary + " --print-ids < " + quoted(dir + "/hello.txt"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "15496 995\n");

  const std::string text = "caf\u00e9 \u4e2d\u6587 \U0001F600  don't\n\nend \xff";
  write_file_atomic(dir + "/mixed.txt", text);
  r = run_command(kBinary + " --print-ids < " + quoted(dir + "/mixed.txt"));
  std::string expected;
  for (const int32_t id : testing::tokenizer().encode(text)) {
    if (!expected.empty()) expected += ' ';
    expected += std::to_string(id);
  }
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, expected + "\n");

  r = run_command(kBinary + " --print-ids < /dev/null");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "\n");
}

TEST(Gpt2TokenizeCli, WritesTheSameShardsAsTheLibrary) {
  const std::string dir = scratch_directory();
  const std::string text = testing::make_corpus(21, 200);
  write_file_atomic(dir + "/corpus.txt", text);
  const CommandResult r =
      run_command(kBinary + " --input " + quoted(dir + "/corpus.txt") + " --out-prefix " + quoted(dir + "/out/c") +
                  " --doc-split blank-line --threads 2 --chunk-bytes 4096 --no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("throughput"), std::string::npos) << r.output;
  const testing::Streams expected =
      testing::reference_streams(testing::reference_documents({text}, DocSplit::BlankLine), true, 0.1);
  EXPECT_EQ(testing::concatenated(expand_shard_pattern(dir + "/out/c_train_*.bin")), expected.train);
  EXPECT_EQ(testing::concatenated(expand_shard_pattern(dir + "/out/c_val_*.bin")), expected.val);
}

TEST(Gpt2TokenizeCli, AnEmptyValSplitIsWarnedAboutWithItsCause) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/one.txt", testing::make_corpus(21, 200));
  const std::string base = kBinary + " --input " + quoted(dir + "/one.txt") + " --no-progress --out-prefix ";
  // One file, read as one document: all of it is train.
  CommandResult r = run_command(base + quoted(dir + "/a") + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the val split is empty: 1 document(s) in all"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give --doc-split blank-line or line"), std::string::npos) << r.output;
  // Paragraphs as documents: a val split, no warning; none asked for (--val-fraction 0): no warning either.
  r = run_command(base + quoted(dir + "/b") + " --doc-split blank-line 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  r = run_command(base + quoted(dir + "/c") + " --val-fraction 0 2>&1");
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  // Booleans take a value as the next argument, as other flags do.
  r = run_command(base + quoted(dir + "/d") + " --doc-split blank-line --eot false 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("eot off"), std::string::npos) << r.output;
}

TEST(Gpt2TokenizeCli, BadFlagsGiveOneErrorLineAndAFailingExit) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/in.txt", "some text");
  const std::string in = " --input " + quoted(dir + "/in.txt");
  const std::string out = " --out-prefix " + quoted(dir + "/o");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--no-such-flag", "no-such-flag"},
      {in + out + " --threads -1", "--threads"},
      {in + out + " --doc-split paragraph", "paragraph"},
      {in + out + " --val-fraction 1", "--val-fraction"},
      {in + out + " --shard-tokens 0", "--shard-tokens"},
      {in + out + " --shard-tokens many", "many"},
      {out, "--input"},
      {in, "--out-prefix"},
      {" --input " + quoted(dir + "/absent.txt") + out, dir + "/absent.txt"},
      {in + " --out-prefix " + quoted(dir + "/in.txt/sub/o"), dir + "/in.txt/sub"},
  };
  for (const auto& [args, needle] : cases) {
    const CommandResult r = run_command(kBinary + " " + args + " 2>&1 >/dev/null");
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("gpt2_tokenize: error: ", 0), 0u) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.output;
  }
}

// Earlier shards of the same prefix are replaced, and those beyond the new run's count removed; a file with a
// shard's name that is not a shard is never touched: the run is refused before it writes anything.
TEST(Gpt2TokenizeCli, ReplacesOnlyEarlierShards) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/in.txt", testing::make_corpus(5, 40));
  const std::string run = kBinary + " --input " + quoted(dir + "/in.txt") + " --out-prefix " + quoted(dir + "/c") +
                          " --no-progress --val-fraction 0";
  const std::string stale_shard = ShardWriter::shard_path(dir + "/c", "train", 7);
  write_shard(stale_shard, std::vector<uint16_t>{1, 2, 3});
  CommandResult r = run_command(run + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(file_exists(stale_shard));  // an earlier run's shard beyond this run's count is removed

  for (const int64_t index : {int64_t{0}, int64_t{9}}) {  // one this run would replace, one it would remove
    const std::string foreign = ShardWriter::shard_path(dir + "/c", "train", index);
    write_file_atomic(foreign, "hello");
    r = run_command(run + " 2>&1 >/dev/null");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(foreign), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("not a token shard"), std::string::npos) << r.output;
    EXPECT_EQ(read_file(foreign), "hello");
    std::remove(foreign.c_str());
  }
}

}  // namespace
}  // namespace lab::ch05
