// ch07_memory_bench as a user runs it, at a tiny size: as one process it runs the memory staircase and says
// that the ZeRO rungs need mpirun; under mpirun with 2 ranks (one OpenMP thread each) it also runs the ZeRO
// staircase and writes its rows ("zero:<rung>", with the theory of parameters + gradients + optimizer) beside
// the one-process rows, rank 0 alone printing; bench_diff reads the JSON.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>

#include "common/bench/result.h"
#include "common/io/files.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

const char* const kTinyRun = " --model tiny --batch 4 --seq 16 --steps 1 --threads 1";

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Runs `command` with its standard output and error into `output`; returns the exit code.
int run_command(const std::string& command, const std::string& output) {
  return exit_code_of(std::system((command + " >" + output + " 2>&1 </dev/null").c_str()));
}

std::string bench_program() {
  return std::string(LAB_BINARY_DIR) + "/bin/ch07_memory_bench";
}

// The rows of a bench JSON by rung name.
std::map<std::string, Json> rows_by_rung(const std::string& path) {
  std::map<std::string, Json> rows;
  for (const Json& row : bench::BenchResult::read(path).rows) rows[row.at("rung").as_string()] = row;
  return rows;
}

TEST(MemoryBenchProgram, OneProcessRunsTheStaircaseAndSaysWhatZeroNeeds) {
  const std::string dir = testing::scratch_directory(), json = dir + "/np1.json", out = dir + "/out.txt";
  ASSERT_EQ(run_command(bench_program() + kTinyRun + " --json " + json, out), 0) << read_file(out);
  const std::string printed = read_file(out);
  EXPECT_NE(printed.find("they need mpirun -np N with N >= 2"), std::string::npos) << printed;
  const std::map<std::string, Json> rows = rows_by_rung(json);
  for (const char* rung :
       {"original", "accumulation", "selective", "selective-ln", "block", "block-one-pass", "optimizer-in-backward"}) {
    ASSERT_TRUE(rows.count(rung)) << rung;
    EXPECT_EQ(rows.at(rung).at("status").as_string(), "ok") << rung;
  }
  EXPECT_FALSE(rows.count("zero:dp"));
}

#ifdef LAB_MPIEXEC
TEST(MemoryBenchProgram, UnderMpirunWritesTheZeroRowsBesideTheOneProcessRows) {
  const std::string dir = testing::scratch_directory(), json = dir + "/np2.json", out = dir + "/out.txt";
  const std::string mpirun = std::string(LAB_MPIEXEC) + " -n 2 --oversubscribe --bind-to none ";
  ASSERT_EQ(
      run_command(mpirun + bench_program() + kTinyRun + " --micro-batches 2 --bucket-mb 0.01 --json " + json, out), 0)
      << read_file(out);
  const std::string printed = read_file(out);
  EXPECT_EQ(printed.find("they need mpirun"), std::string::npos) << printed;
  // Rank 0 alone prints: the one-process table once.
  EXPECT_EQ(printed.find("measured (allocator peaks"), printed.rfind("measured (allocator peaks")) << printed;

  const std::map<std::string, Json> rows = rows_by_rung(json);
  EXPECT_TRUE(rows.count("optimizer-in-backward"));
  for (const char* rung : {"zero:dp", "zero:zero1", "zero:zero2", "zero:zero3", "zero:zero3-prefetch"}) {
    ASSERT_TRUE(rows.count(rung)) << rung;
    const Json& row = rows.at(rung);
    ASSERT_EQ(row.at("status").as_string(), "ok") << rung << ": " << row.dump();
    EXPECT_EQ(row.at("ranks").as_int(), 2);
    EXPECT_GT(row.at("theory_state_MiB").as_number(), 0) << rung;
    EXPECT_GE(row.at("max_rank_peak_MiB_median").as_number(), row.at("peak_MiB_median").as_number()) << rung;
    // Every stage within its formula plus what theory holds whole beside the shards (zero/zero_theory.h).
    EXPECT_LE(row.at("state_MiB_median").as_number(),
              1.15 * (row.at("theory_state_MiB").as_number() + row.at("theory_whole_MiB").as_number()))
        << rung;
  }
  // Data parallelism and stage 1 at their formula, 16Ψ and 8Ψ + 8Ψ/2, with nothing whole beside.
  for (const char* rung : {"zero:dp", "zero:zero1"}) {
    EXPECT_EQ(rows.at(rung).at("theory_whole_MiB").as_number(), 0.0) << rung;
    const double theory = rows.at(rung).at("theory_state_MiB").as_number();
    EXPECT_NEAR(rows.at(rung).at("state_MiB_median").as_number(), theory, 0.01 * theory) << rung;
  }
  EXPECT_DOUBLE_EQ(rows.at("zero:zero1").at("theory_state_MiB").as_number(),
                   0.75 * rows.at("zero:dp").at("theory_state_MiB").as_number());
  EXPECT_EQ(bench::BenchResult::read(json).command.rfind("mpirun -np 2 ", 0), 0u);

  // bench_diff pairs the rows of two results by rung, ZeRO rows included.
  const std::string diff = dir + "/diff.txt";
  EXPECT_EQ(run_command(std::string(LAB_BINARY_DIR) + "/bin/bench_diff " + json + " " + json, diff), 0)
      << read_file(diff);
  EXPECT_NE(read_file(diff).find("zero:zero2"), std::string::npos) << read_file(diff);
}
#endif

}  // namespace
}  // namespace lab
