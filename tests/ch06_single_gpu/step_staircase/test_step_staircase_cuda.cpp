// gpt2_step_bench --staircase ch06 on a GPU: every rung runs, TF32 included, at a tiny size. Labels ch06 and cuda:
// runs in the emulation build (whose times are CPU times: only the rows are checked), skips without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/bench/result.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::scratch_directory;

TEST(Ch06StaircaseGpu, EveryRungRuns) {
  LAB_REQUIRE_GPU();
  const std::string json = scratch_directory() + "/staircase.json";
  const std::string cmd = std::string(LAB_BINARY_DIR) +
                          "/bin/gpt2_step_bench --staircase ch06 --model tiny --device cuda --batch 2 --seq 8 "
                          "--steps 1 --warmup 0 --json " +
                          json + " >" + scratch_directory() + "/stdout 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  const bench::BenchResult result = bench::BenchResult::read(json);
  const std::vector<std::string> names = {"fp32", "tf32", "bf16", "fused", "batch x2"};
  ASSERT_EQ(result.rows.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(result.rows[i].at("rung").as_string(), names[i]);
    EXPECT_EQ(result.rows[i].at("status").as_string(), "ok") << names[i];
    EXPECT_GT(result.rows[i].at("tokens_per_s_median").as_number(), 0) << names[i];
  }
}

}  // namespace
}  // namespace lab
