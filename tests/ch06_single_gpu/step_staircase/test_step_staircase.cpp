// gpt2_step_bench --staircase ch06: the rungs as data (one change from each rung to the next, the GPU-only TF32
// rung left out on a CPU), and the real program at a tiny size: its table, its JSON rows, and its errors.
// Label ch06.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ch06_single_gpu/step_staircase.h"
#include "common/bench/result.h"
#include "common/io/files.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::scratch_directory;

std::vector<std::string> rung_names(const staircase::Staircase& stairs) {
  std::vector<std::string> names;
  for (const staircase::Rung& rung : stairs.rungs) names.push_back(rung.name);
  return names;
}

TEST(Ch06Staircase, RungsThatApplyOnEachDevice) {
  const std::vector<std::string> base = {"--model", "tiny", "--seq", "8"};
  EXPECT_EQ(rung_names(ch06::speed_staircase(base, 4, false)),
            (std::vector<std::string>{"fp32", "bf16", "fused", "batch x2"}));
  EXPECT_EQ(rung_names(ch06::speed_staircase(base, 4, true)),
            (std::vector<std::string>{"fp32", "tf32", "bf16", "fused", "batch x2"}));
}

TEST(Ch06Staircase, EachRungChangesOneSetting) {
  for (const bool on_gpu : {false, true}) {
    const staircase::Staircase stairs = ch06::speed_staircase({"--model", "tiny"}, 4, on_gpu);
    EXPECT_TRUE(staircase::check_one_change_per_rung(stairs).empty()) << "on_gpu " << on_gpu;
    // The changes, named: the TF32 and bf16 rungs replace the --dtype below them, the last rung doubles the batch.
    std::vector<std::string> changes;
    for (size_t i = 1; i < stairs.rungs.size(); ++i)
      changes.push_back(staircase::describe_change(staircase::parse_settings(stairs.flags_for(stairs.rungs[i - 1])),
                                                   staircase::parse_settings(stairs.flags_for(stairs.rungs[i]))));
    std::vector<std::string> expected = {"--kernels reference -> fused", "--batch 4 -> 8"};
    if (on_gpu)
      expected.insert(expected.begin(), {"--dtype fp32 -> tf32", "--dtype tf32 -> bf16"});
    else
      expected.insert(expected.begin(), "--dtype fp32 -> bf16");
    EXPECT_EQ(changes, expected);
  }
}

struct ProgramRun {
  int exit_code = -1;
  std::string out;
};

ProgramRun run_step_bench(const std::string& args) {
  const std::string out = scratch_directory() + "/stdout";
  const std::string cmd = std::string(LAB_BINARY_DIR) + "/bin/gpt2_step_bench " + args + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out)};
}

TEST(Ch06Staircase, ProgramWritesOneRowPerRung) {
  const std::string json = scratch_directory() + "/staircase.json";
  const ProgramRun run = run_step_bench(
      "--staircase ch06 --model tiny --device cpu --batch 2 --seq 8 --steps 2 --warmup 0 --threads 2 --json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  const bench::BenchResult result = bench::BenchResult::read(json);
  ASSERT_EQ(result.rows.size(), 4u) << run.out;
  const std::vector<std::string> names = {"fp32", "bf16", "fused", "batch x2"};
  for (size_t i = 0; i < names.size(); ++i) {
    const Json& row = result.rows[i];
    EXPECT_EQ(row.at("rung").as_string(), names[i]);
    EXPECT_EQ(row.at("status").as_string(), "ok") << names[i];
    EXPECT_GT(row.at("step_ms_median").as_number(), 0) << names[i];
    EXPECT_GT(row.at("tokens_per_s_median").as_number(), 0) << names[i];
    EXPECT_GT(row.at("mem_peak_bytes_median").as_number(), 0) << names[i];
  }
  // Each rung is compared with the one before it.
  EXPECT_TRUE(result.rows[0].at("step_ms_vs_previous").is_null());
  EXPECT_GT(result.rows[1].at("step_ms_vs_previous").as_number(), 0);
  EXPECT_EQ(result.rows[3].at("change").as_string(), "--batch 2 -> 4");
  // Twice the batch holds more activations.
  EXPECT_GT(result.rows[3].at("mem_peak_bytes_median").as_number(),
            result.rows[2].at("mem_peak_bytes_median").as_number());
  EXPECT_NE(run.out.find("fused"), std::string::npos) << run.out;
}

TEST(Ch06Staircase, ProgramRefusesBadRequests) {
  const ProgramRun unknown = run_step_bench("--staircase ch99 --model tiny --device cpu");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.out.find("unknown staircase 'ch99'"), std::string::npos) << unknown.out;
  const ProgramRun with_dtype = run_step_bench("--staircase ch06 --model tiny --device cpu --dtype fp32");
  EXPECT_NE(with_dtype.exit_code, 0);
  EXPECT_NE(with_dtype.out.find("--staircase sets --dtype on each rung"), std::string::npos) << with_dtype.out;
  const ProgramRun bad_kernels = run_step_bench("--model tiny --device cpu --kernels fastest");
  EXPECT_NE(bad_kernels.exit_code, 0);
  EXPECT_NE(bad_kernels.out.find("fastest"), std::string::npos) << bad_kernels.out;
}

}  // namespace
}  // namespace lab
