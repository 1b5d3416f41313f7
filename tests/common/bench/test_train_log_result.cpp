// Training logs read as bench results: the metrics and the loss curve, resumed logs, bad logs, and bench_diff
// comparing two logs.
#include <gtest/gtest.h>

#include <sstream>

#include "common/bench/diff.h"
#include "common/bench/train_log_result.h"
#include "common/io/files.h"
#include "tests/common/bench/bench_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::expect_error;
using lab::testing::scratch_directory;

std::string write_log(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  write_file_atomic(path, text);
  return path;
}

TEST(TrainLogResult, StepTimesBecomeMetricsAndTheLossCurveRows) {
  const std::string dir = scratch_directory();
  const BenchResult r = result_from_train_log(write_log(dir, "a.jsonl", testing::train_log_a()));
  EXPECT_EQ(r.bench, "gpt2_train");
  EXPECT_EQ(r.command, "gpt2_train --log-json a.jsonl");
  EXPECT_EQ(r.machine, testing::fixture_machine());
  const BenchMetric* step_ms = r.find_metric("step_ms");
  ASSERT_NE(step_ms, nullptr);
  EXPECT_EQ(step_ms->unit, "ms");
  EXPECT_EQ(step_ms->summary.count, 4);
  EXPECT_DOUBLE_EQ(step_ms->summary.median, 106.5);
  EXPECT_DOUBLE_EQ(step_ms->summary.min, 100);
  EXPECT_DOUBLE_EQ(step_ms->summary.max, 110);
  ASSERT_NE(r.find_metric("tokens_per_s"), nullptr);
  EXPECT_EQ(r.find_metric("tokens_per_s")->better, Better::Higher);
  ASSERT_NE(r.find_column("val_loss"), nullptr);
  EXPECT_EQ(r.find_column("val_loss")->better, Better::Lower);
  // The curve at the evaluations: steps 0 (no training loss yet), 2 and 4.
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0].dump(), R"({"step": 0, "loss": null, "val_loss": 10.9})");
  EXPECT_EQ(r.rows[1].dump(), R"({"step": 2, "loss": 9, "val_loss": 9.1})");
  EXPECT_EQ(r.rows[2].dump(), R"({"step": 4, "loss": 7, "val_loss": 7.1})");
}

TEST(TrainLogResult, WithoutEvaluationsTheCurveIsSampledAtTenthsOfTheRun) {
  const std::string dir = scratch_directory();
  std::istringstream in(
      testing::train_log_text(std::vector<double>(25, 10.0), std::vector<double>(25, 5.0), 1000, 0, "x"));
  std::string text;  // the log without its evaluations
  for (std::string line; std::getline(in, line);)
    if (line.find("val_loss") == std::string::npos) text += line + "\n";
  const BenchResult r = result_from_train_log(write_log(dir, "no_eval.jsonl", text));
  std::vector<int64_t> steps;
  for (const Json& row : r.rows) steps.push_back(row.at("step").as_int());
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6, 9, 12, 15, 18, 21, 24, 25}));
}

TEST(TrainLogResult, AResumedLogCountsItsLastRecordOfAStep) {
  // A run of 4 steps interrupted after step 4, resumed from its checkpoint at step 2 to step 4 again.
  const std::string dir = scratch_directory();
  const std::string first = testing::train_log_a();
  const std::string again =
      testing::train_log_text({90, 95, 91, 92}, {10.5, 9.0, 7.9, 6.9}, 2, 0.1, "gpt2_train --resume ckpt");
  const BenchResult r = result_from_train_log(write_log(dir, "resumed.jsonl", first + again));
  EXPECT_EQ(r.command, "gpt2_train --log-json a.jsonl");  // the first header describes the run
  EXPECT_EQ(r.rows.back().dump(), R"({"step": 4, "loss": 6.9, "val_loss": 7})");
}

TEST(TrainLogResult, BadLogsNameTheFileAndLine) {
  const std::string dir = scratch_directory();
  std::string text = testing::train_log_a();
  text.insert(text.find('\n') + 1, "{\"step\": 1, \"loss\": \n");
  const std::string broken = write_log(dir, "broken.jsonl", text);
  expect_error([&] { result_from_train_log(broken); }, ErrorKind::Format, {broken, "line 2"});
  const std::string headless = write_log(dir, "headless.jsonl", "{\"step\": 1, \"loss\": 2.0, \"ms\": 1}\n");
  expect_error([&] { result_from_train_log(headless); }, ErrorKind::Format, {"line 1", "header"});
  const std::string stepless = write_log(dir, "stepless.jsonl", text.substr(0, text.find('\n') + 1));
  expect_error([&] { result_from_train_log(stepless); }, ErrorKind::Format, {"without any step"});
}

TEST(TrainLogResult, ResultFilesAndLogsAreToldApart) {
  const std::string dir = scratch_directory();
  testing::fixture_a().write(dir + "/a.json");
  EXPECT_EQ(read_result_or_train_log(dir + "/a.json").bench, "matmul");
  EXPECT_EQ(read_result_or_train_log(write_log(dir, "a.jsonl", testing::train_log_a())).bench, "gpt2_train");
  write_file_atomic(dir + "/neither.txt", "hello\n");
  expect_error([&] { read_result_or_train_log(dir + "/neither.txt"); }, ErrorKind::Format, {"neither.txt"});
}

TEST(TrainLogResult, BenchDiffMarksAFasterRunAndALowerLoss) {
  const std::string dir = scratch_directory();
  const BenchResult a = result_from_train_log(write_log(dir, "a.jsonl", testing::train_log_a()));
  const BenchResult b = result_from_train_log(write_log(dir, "b.jsonl", testing::train_log_b()));
  const std::string report = diff_results(a, b, {"a.jsonl", "b.jsonl", 0.05});
  EXPECT_NE(report.find("step_ms       ms        lower   106.5 [100, 110]"), std::string::npos) << report;
  auto line_of = [&](const std::string& start) {
    const size_t at = report.find(start);
    return at == std::string::npos ? std::string() : report.substr(at, report.find('\n', at) - at);
  };
  EXPECT_NE(line_of("step_ms").find("gain"), std::string::npos) << report;
  EXPECT_NE(line_of("tokens_per_s").find("gain"), std::string::npos) << report;
  EXPECT_NE(line_of("4     val_loss").find("gain"), std::string::npos) << report;  // 7.1 -> 6.4: -10%
  EXPECT_NE(line_of("2     loss").find("~"), std::string::npos) << report;         // 9.0 -> 8.8: -2%
}

}  // namespace
}  // namespace lab::bench
