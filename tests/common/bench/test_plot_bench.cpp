// scripts/plot_bench.py on the fixture results: it writes a PNG, and a metric that no file has is one clear
// error. Skipped where Debian's python3 with matplotlib is not installed.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/io/files.h"
#include "tests/common/bench/bench_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::scratch_directory;

constexpr const char* kPython = "/usr/bin/python3";

bool matplotlib_available() {
  return file_exists(kPython) &&
         std::system((std::string(kPython) + " -c 'import matplotlib' 2>/dev/null").c_str()) == 0;
}

int run_plot(const std::string& args, const std::string& log) {
  const std::string command =
      std::string(kPython) + " " + LAB_SOURCE_DIR + "/scripts/plot_bench.py " + args + " > " + log + " 2>&1";
  return WEXITSTATUS(std::system(command.c_str()));
}

class PlotBench : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!matplotlib_available()) GTEST_SKIP() << kPython << " with matplotlib is not installed";
    dir_ = scratch_directory();
    testing::fixture_a().write(dir_ + "/a.json");
    testing::fixture_b().write(dir_ + "/b.json");
  }
  std::string dir_;
};

bool is_png(const std::string& path) {
  return file_exists(path) && read_file(path).rfind("\x89PNG\r\n\x1a\n", 0) == 0;
}

TEST_F(PlotBench, DrawsTheStagesOfTwoFiles) {
  const std::string png = dir_ + "/stages.png";
  EXPECT_EQ(run_plot(dir_ + "/a.json " + dir_ + "/b.json --metric ms --out " + png, dir_ + "/log.txt"), 0)
      << read_file(dir_ + "/log.txt");
  EXPECT_TRUE(is_png(png));
}

TEST_F(PlotBench, DrawsATopLevelMetricWithItsRange) {
  const std::string png = dir_ + "/step.png";
  EXPECT_EQ(run_plot(dir_ + "/a.json " + dir_ + "/b.json --metric step_ms --out " + png, dir_ + "/log.txt"), 0)
      << read_file(dir_ + "/log.txt");
  EXPECT_TRUE(is_png(png));
}

TEST_F(PlotBench, UnknownMetricIsOneClearError) {
  const std::string png = dir_ + "/none.png";
  EXPECT_EQ(run_plot(dir_ + "/a.json --metric watts --out " + png, dir_ + "/log.txt"), 1);
  const std::string log = read_file(dir_ + "/log.txt");
  EXPECT_NE(log.find("'watts' is neither a row column (gflops, ms)"), std::string::npos) << log;
  EXPECT_FALSE(file_exists(png));
}

TEST_F(PlotBench, DrawsTheCurvesOfTwoTrainingLogs) {
  write_file_atomic(dir_ + "/a.jsonl", testing::train_log_a());
  write_file_atomic(dir_ + "/b.jsonl", testing::train_log_b());
  for (const char* field : {"loss", "val_loss", "ms"}) {
    const std::string png = dir_ + "/" + field + ".png";
    EXPECT_EQ(run_plot(dir_ + "/a.jsonl " + dir_ + "/b.jsonl --metric " + field + " --out " + png, dir_ + "/log.txt"),
              0)
        << read_file(dir_ + "/log.txt");
    EXPECT_TRUE(is_png(png)) << field;
  }
}

TEST_F(PlotBench, LogsWithAnUnknownFieldOrMixedWithResultsAreOneClearError) {
  write_file_atomic(dir_ + "/a.jsonl", testing::train_log_a());
  EXPECT_EQ(run_plot(dir_ + "/a.jsonl --metric watts --out " + dir_ + "/x.png", dir_ + "/log.txt"), 1);
  std::string log = read_file(dir_ + "/log.txt");
  EXPECT_NE(log.find("'watts' is not a field of the logs' records (data_ms, grad_norm, loss, lr, mem_peak_bytes, ms, "
                     "tokens_per_s, val_loss)"),
            std::string::npos)
      << log;
  EXPECT_EQ(run_plot(dir_ + "/a.jsonl " + dir_ + "/a.json --metric loss --out " + dir_ + "/x.png", dir_ + "/log.txt"),
            1);
  log = read_file(dir_ + "/log.txt");
  EXPECT_NE(log.find("give either bench results or training logs, not both"), std::string::npos) << log;
  EXPECT_FALSE(file_exists(dir_ + "/x.png"));
}

}  // namespace
}  // namespace lab::bench
