// ch05_loader_bench as a user runs it: --quick gives the whole table in seconds, everything written goes into
// a scratch directory that is removed at the end, and an unwritable --json is refused before any measurement.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "common/bench/result.h"
#include "common/io/files.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::scratch_directory;

struct BenchRun {
  int exit_code;
  std::string out, err;
};

BenchRun run_loader_bench(const std::string& args, const std::string& dir) {
  const std::string cmd =
      std::string(LAB_BINARY_DIR) + "/bin/ch05_loader_bench " + args + " >" + dir + "/out.txt 2>" + dir + "/err.txt";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir + "/out.txt"), read_file(dir + "/err.txt")};
}

TEST(LoaderBench, AQuickRunMeasuresEveryStageAndLeavesNothingBehind) {
  const std::string dir = scratch_directory();
  // --quick, made quicker still: the test checks the plumbing, not the numbers.
  const BenchRun r =
      run_loader_bench("--quick --steps 2 --warmup-steps 1 --slow-read-us 5000 --device cpu --threads 1 --dir " + dir +
                           "/work --json " + dir + "/loaders.json",
                       dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const bench::BenchResult result = bench::BenchResult::read(dir + "/loaders.json");
  EXPECT_EQ(result.rows.size(), 8u);  // 4 stages, with and without the slow source
  for (const Json& row : result.rows) EXPECT_GT(row.at("tokens_per_s").as_number(), 0) << row.dump();
  ASSERT_NE(result.find_metric("step_ms_sync"), nullptr);
  EXPECT_EQ(result.find_metric("step_ms_sync")->unit, "ms");
  EXPECT_NE(r.out.find("removing the scratch directory " + dir + "/work/run."), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/work")) << "the shards and logs must be gone";
}

TEST(LoaderBench, AnUnwritableJsonIsRefusedBeforeAnyMeasurement) {
  const std::string dir = scratch_directory();
  const BenchRun r = run_loader_bench("--quick --dir " + dir + "/work --json /proc/forbidden.json", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "ch05_loader_bench: error: cannot write '/proc/forbidden.json': cannot create a file in '/proc': No such "
            "file or directory\n");
  EXPECT_FALSE(file_exists(dir + "/work"));
}

}  // namespace
}  // namespace lab
