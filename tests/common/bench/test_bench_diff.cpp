// bench_diff: the report on two small results, and the executable's behaviour on files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "common/bench/diff.h"
#include "common/io/files.h"
#include "tests/common/bench/bench_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::scratch_directory;
using testing::fixture_a;
using testing::fixture_b;

// The report's line whose first word is `first`, split into its columns (separated by 2+ spaces).
std::vector<std::string> line_starting_with(const std::string& report, const std::string& first) {
  std::istringstream in(report);
  std::string line;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || line.compare(start, first.size(), first) != 0) continue;
    std::vector<std::string> cells;
    size_t pos = start;
    while (pos < line.size()) {
      const size_t gap = line.find("  ", pos);
      cells.push_back(line.substr(pos, gap - pos));
      if (gap == std::string::npos) break;
      pos = line.find_first_not_of(' ', gap);
    }
    return cells;
  }
  ADD_FAILURE() << "no line starting with '" << first << "' in:\n" << report;
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(BenchDiff, MetricsWithRatiosAndVerdicts) {
  const std::string report = diff_results(fixture_a(), fixture_b(), {"a.json", "b.json", 0.05});
  EXPECT_TRUE(contains(report, "A: a.json")) << report;
  EXPECT_TRUE(contains(report, "./bin/matmul_bench --version 2")) << report;
  EXPECT_TRUE(contains(report, "Machine: the same for both: Test CPU (8 cores, 16.0 GiB), no GPU")) << report;

  EXPECT_EQ(line_starting_with(report, "step_ms"),
            (std::vector<std::string>{"step_ms", "ms", "lower", "11 [10, 12]", "7.5 [7, 8]", "0.6818", "gain"}));
  EXPECT_EQ(line_starting_with(report, "tokens_per_s"),
            (std::vector<std::string>{"tokens_per_s", "tokens/s", "higher", "1010 [1000, 1020]", "1005 [1000, 1015]",
                                      "0.995", "within spread"}));
  EXPECT_TRUE(contains(report, "only in A: load_ms")) << report;
  EXPECT_TRUE(contains(report, "only in B: mem_gb")) << report;
}

TEST(BenchDiff, RowsMatchedByLabel) {
  const std::string report = diff_results(fixture_a(), fixture_b(), {"a.json", "b.json", 0.05});
  EXPECT_TRUE(contains(report, "Rows matched by \"stage\"")) << report;
  EXPECT_EQ(line_starting_with(report, "v2 tiled  ms"),
            (std::vector<std::string>{"v2 tiled", "ms", "20", "10", "0.5", "gain"}));
  // 1% slower: within the 5% tolerance.
  EXPECT_EQ(line_starting_with(report, "v1 naive  ms"),
            (std::vector<std::string>{"v1 naive", "ms", "40", "40.4", "1.01", "~"}));
  // gflops has no declared direction: a ratio, no mark.
  EXPECT_EQ(line_starting_with(report, "v2 tiled  gflops"),
            (std::vector<std::string>{"v2 tiled", "gflops", "100", "200", "2"}));
  EXPECT_TRUE(contains(report, "only in A: row \"v3 only in A\"")) << report;
  EXPECT_TRUE(contains(report, "only in B: row \"v4 only in B\"")) << report;
}

TEST(BenchDiff, ARegressionIsMarked) {
  const std::string report = diff_results(fixture_b(), fixture_a());
  EXPECT_EQ(line_starting_with(report, "step_ms").back(), "regression");
  EXPECT_EQ(line_starting_with(report, "v2 tiled  ms").back(), "regression");
}

TEST(BenchDiff, DifferentMachinesAreListedFieldByField) {
  BenchResult b = fixture_b();
  b.machine.cpu_model = "Other CPU";
  b.machine.gpu_count = 1;
  b.machine.gpu_name = "Test GPU";
  const std::string report = diff_results(fixture_a(), b);
  EXPECT_TRUE(contains(report, "Machines differ")) << report;
  EXPECT_EQ(line_starting_with(report, "cpu_model"), (std::vector<std::string>{"cpu_model", "Test CPU", "Other CPU"}));
  EXPECT_EQ(line_starting_with(report, "gpu_count"), (std::vector<std::string>{"gpu_count", "0", "1"}));
  EXPECT_FALSE(contains(report, "hostname")) << report;  // equal fields are not listed
}

// ---------------------------------------------------------------- the executable

struct ToolRun {
  int exit_code;
  std::string output;
};

ToolRun run_bench_diff(const std::string& args, const std::string& dir) {
  const std::string out = dir + "/output.txt";
  const int status =
      std::system((std::string(LAB_BINARY_DIR) + "/bin/bench_diff " + args + " > " + out + " 2>&1").c_str());
  return {WEXITSTATUS(status), read_file(out)};
}

TEST(BenchDiffTool, PrintsTheReportOfTwoFiles) {
  const std::string dir = scratch_directory();
  fixture_a().write(dir + "/a.json");
  fixture_b().write(dir + "/b.json");
  const ToolRun run = run_bench_diff("--a " + dir + "/a.json --b " + dir + "/b.json", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, diff_results(fixture_a(), fixture_b(), {dir + "/a.json", dir + "/b.json", 0.05}));
}

TEST(BenchDiffTool, BadInputIsOneErrorLine) {
  const std::string dir = scratch_directory();
  fixture_a().write(dir + "/a.json");
  write_file_atomic(dir + "/broken.json", "{\"bench\": \"x\"}");

  const ToolRun missing = run_bench_diff("--a " + dir + "/a.json --b " + dir + "/absent.json", dir);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.output, "bench_diff: error: cannot open '" + dir + "/absent.json': No such file or directory\n");

  const ToolRun broken = run_bench_diff("--a " + dir + "/a.json --b " + dir + "/broken.json", dir);
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_EQ(broken.output, "bench_diff: error: " + dir + "/broken.json: machine: JSON: missing key 'machine'\n");

  const ToolRun no_b = run_bench_diff("--a " + dir + "/a.json", dir);
  EXPECT_EQ(no_b.exit_code, 1);
  EXPECT_TRUE(contains(no_b.output, "--b")) << no_b.output;

  const ToolRun three = run_bench_diff(dir + "/a.json " + dir + "/a.json " + dir + "/a.json", dir);
  EXPECT_EQ(three.exit_code, 1);
  EXPECT_EQ(three.output, "bench_diff: error: too many files: '" + dir + "/a.json' (give two: bench_diff A B)\n");
}

TEST(BenchDiffTool, TakesTheTwoFilesAsPositionalArguments) {
  const std::string dir = scratch_directory();
  fixture_a().write(dir + "/a.json");
  fixture_b().write(dir + "/b.json");
  const std::string expected = diff_results(fixture_a(), fixture_b(), {dir + "/a.json", dir + "/b.json", 0.05});
  const ToolRun positional = run_bench_diff(dir + "/a.json " + dir + "/b.json", dir);
  EXPECT_EQ(positional.exit_code, 0) << positional.output;
  EXPECT_EQ(positional.output, expected);
  const ToolRun mixed = run_bench_diff("--row-tolerance 0.05 " + dir + "/a.json --b=" + dir + "/b.json", dir);
  EXPECT_EQ(mixed.output, expected);
}

TEST(BenchDiffTool, ComparesTwoTrainingLogs) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/a.jsonl", testing::train_log_a());
  write_file_atomic(dir + "/b.jsonl", testing::train_log_b());
  const ToolRun run = run_bench_diff(dir + "/a.jsonl " + dir + "/b.jsonl", dir);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "bench gpt2_train, 2025-01-31T08:00:00Z: gpt2_train --log-json b.jsonl --lr 2e-3"))
      << run.output;
  EXPECT_EQ(line_starting_with(run.output, "4     val_loss"),
            (std::vector<std::string>{"4", "val_loss", "7.1", "6.4", "0.9014", "gain"}));
}

}  // namespace
}  // namespace lab::bench
