// gpt2_step_bench's result files as bench_diff reads them: metrics in the units they are named in, a direction
// for every timed column, one row per run that pairs across batch shapes, and a marked regression when the
// step gets slower by more than the spread of its repeats.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/bench/diff.h"
#include "common/bench/result.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::ProcessResult;
using testing::run_program;
using testing::scratch_directory;

bench::BenchResult run_step_bench(const std::string& dir, const std::string& name, const std::string& args) {
  const std::string path = dir + "/" + name;
  const ProcessResult r = run_program("gpt2_step_bench",
                                      "--model tiny --device cpu --steps 3 --warmup 1 "
                                      "--gemm-repeats 1 --threads 2 --json " +
                                          path + " " + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return bench::BenchResult::read(path);
}

// The cells of the report's line that starts with `start` (cells are separated by two or more spaces).
std::vector<std::string> cells_of(const std::string& report, const std::string& start) {
  const size_t at = report.find("\n  " + start);
  if (at == std::string::npos) return {};
  const std::string line = report.substr(at + 3, report.find('\n', at + 1) - at - 3);
  std::vector<std::string> cells;
  for (size_t pos = 0; pos < line.size();) {
    const size_t gap = line.find("  ", pos);
    cells.push_back(line.substr(pos, gap - pos));
    if (gap == std::string::npos) break;
    pos = line.find_first_not_of(' ', gap);
  }
  return cells;
}

TEST(StepBenchFiles, UnitsAndDirectionsAreRecorded) {
  const std::string dir = scratch_directory();
  const bench::BenchResult r = run_step_bench(dir, "a.json", "");
  const bench::BenchMetric* step = r.find_metric("step_ms");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->unit, "ms");
  EXPECT_EQ(step->summary.count, 3);
  ASSERT_EQ(r.rows.size(), 1u);
  // The metric and the row describe the same steps, in the same unit.
  EXPECT_DOUBLE_EQ(r.rows[0].at("ms_median").as_number(), step->summary.median);
  EXPECT_EQ(r.rows[0].as_object().front().first, "model");
  for (const char* column : {"ms_median", "forward_ms", "backward_ms", "optimizer_ms", "peak_rss_bytes"}) {
    ASSERT_NE(r.find_column(column), nullptr) << column;
    EXPECT_EQ(r.find_column(column)->better, bench::Better::Lower) << column;
  }
  ASSERT_NE(r.find_column("tokens_per_s"), nullptr);
  EXPECT_EQ(r.find_column("tokens_per_s")->better, bench::Better::Higher);
}

TEST(StepBenchFiles, BenchDiffMarksASlowerStepBeyondTheSpread) {
  const std::string dir = scratch_directory();
  const bench::BenchResult a = run_step_bench(dir, "a.json", "");
  // B: every step three times A's slowest: slower by more than either spread.
  bench::BenchResult b = a;
  const bench::Summary& sa = a.find_metric("step_ms")->summary;
  b.add_metric("step_ms", std::vector<double>(3, 3 * sa.max), "ms", bench::Better::Lower);
  b.rows[0].set("ms_median", 3 * sa.max);
  b.write(dir + "/b.json");
  const ProcessResult diff = run_program("bench_diff", dir + "/a.json " + dir + "/b.json");
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(cells_of(diff.out, "step_ms").back(), "regression") << diff.out;
  EXPECT_EQ(cells_of(diff.out, "tiny   ms_median").back(), "regression") << diff.out;
  const ProcessResult back = run_program("bench_diff", dir + "/b.json " + dir + "/a.json");
  EXPECT_EQ(cells_of(back.out, "step_ms").back(), "gain") << back.out;
}

TEST(StepBenchFiles, RunsOfTwoBatchShapesPairUp) {
  const std::string dir = scratch_directory();
  run_step_bench(dir, "b2.json", "--batch 2 --seq 16");
  run_step_bench(dir, "b4.json", "--batch 4 --seq 16");
  const ProcessResult diff = run_program("bench_diff", dir + "/b2.json " + dir + "/b4.json");
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(cells_of(diff.out, "tiny   batch"), (std::vector<std::string>{"tiny", "batch", "2", "4", "2"})) << diff.out;
  EXPECT_EQ(diff.out.find("only in"), std::string::npos) << diff.out;
}

TEST(StepBenchFiles, BatchFitsSearchesTheBatchAndAccumulateCountsItsTokens) {
  // A budget between the peaks of batches 2 and 4: the search finds 2 or 3 (it measures; the peak grows with the
  // rows), and the row records it with the micro-batches per step, whose tokens the throughput counts.
  const std::string dir = scratch_directory();
  const double peak2 = run_step_bench(dir, "b2.json", "--batch 2 --seq 16").rows.at(0).at("mem_peak_bytes").as_number();
  const double peak4 = run_step_bench(dir, "b4.json", "--batch 4 --seq 16").rows.at(0).at("mem_peak_bytes").as_number();
  ASSERT_LT(peak2, peak4);
  const int64_t budget = static_cast<int64_t>((peak2 + peak4) / 2);
  const bench::BenchResult fit =
      run_step_bench(dir, "fit.json", "--seq 16 --accumulate 2 --batch-fits " + std::to_string(budget));
  ASSERT_EQ(fit.rows.size(), 1u);
  const Json& row = fit.rows[0];
  EXPECT_GE(row.at("batch").as_int(), 2);
  EXPECT_LE(row.at("batch").as_int(), 3);
  EXPECT_EQ(row.at("accumulate").as_int(), 2);
  const double tokens = static_cast<double>(row.at("batch").as_int() * 16 * 2);
  EXPECT_NEAR(row.at("tokens_per_s").as_number() * row.at("ms_median").as_number() / 1e3, tokens, 1e-6 * tokens);

  const ProcessResult none = run_program("gpt2_step_bench", "--model tiny --device cpu --batch-fits 1KiB");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("--batch-fits 1KiB: not even one row of 64 tokens fits"), std::string::npos) << none.err;
  const ProcessResult outside = run_program("gpt2_step_bench", "--model tiny --device cpu --batch-fits earlier-rungs");
  EXPECT_NE(outside.exit_code, 0);
  EXPECT_NE(outside.err.find("inside a staircase only"), std::string::npos) << outside.err;
}

TEST(StepBenchFiles, TheBooksStaircaseRunsEveryRungOnTheCpuThenPyTorch) {
  // Debian's PyTorch is /usr/bin/python3's (scripts/test.sh installs it); without it the row says why it did not run.
  const std::string python = "/usr/bin/python3";
  const bool torch = std::system((python + " -c 'import torch' 2> /dev/null").c_str()) == 0;
  const std::string dir = scratch_directory();
  const ProcessResult r = run_program("gpt2_step_bench",
                                      "--staircase ch10 --model tiny --device cpu --batch 2 --seq 8 "
                                      "--steps 2 --warmup 0 --threads 2 --python " +
                                          python + " --json " + dir + "/ch10.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* rung : {"fp32", "bf16", "fused", "16-bit activations", "batched attention", "flash attention",
                           "largest batch", "accumulation"})
    EXPECT_NE(r.out.find(std::string("  ") + rung + ": done"), std::string::npos) << rung << "\n" << r.out;
  EXPECT_NE(r.out.find("largest batch: batch "), std::string::npos) << r.out;
  const bench::BenchResult result = bench::BenchResult::read(dir + "/ch10.json");
  ASSERT_EQ(result.rows.size(), 9u);  // 8 rungs, then PyTorch's eager fp32 step
  const Json& pytorch = result.rows.back();
  EXPECT_EQ(pytorch.at("rung").as_string(), "pytorch eager fp32");
  if (torch) {
    EXPECT_EQ(pytorch.at("status").as_string(), "ok") << pytorch.dump();
    EXPECT_GT(pytorch.at("tokens_per_s_median").as_number(), 0);
    EXPECT_NE(r.out.find("pytorch eager fp32: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ours / PyTorch tokens/s = x"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(pytorch.at("status").as_string(), "not run");
    EXPECT_NE(r.out.find("PyTorch is not installed"), std::string::npos) << r.out;
  }
  // --no-pytorch leaves it out.
  const ProcessResult without =
      run_program("gpt2_step_bench",
                  "--staircase ch10 --model tiny --device cpu --batch 2 --seq 8 --steps 1 --warmup 0 --no-pytorch");
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_EQ(without.out.find("beside PyTorch"), std::string::npos) << without.out;
}

}  // namespace
}  // namespace lab
