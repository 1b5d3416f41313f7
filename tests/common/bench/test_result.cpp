// BenchResult: JSON round trip, validation of what is read back, and the machine description.
#include <gtest/gtest.h>

#include <regex>

#include "common/bench/result.h"
#include "common/io/files.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::expect_error;
using lab::testing::scratch_directory;

BenchResult sample_result() {
  BenchResult r;
  r.bench = "matmul";
  r.machine.hostname = "node1";
  r.machine.os = "Linux 6.1 x86_64";
  r.machine.cpu_model = "Test CPU";
  r.machine.cpu_cores = 8;
  r.machine.threads = 8;
  r.machine.memory_bytes = int64_t{64} << 30;
  r.machine.compiler = "GCC 12";
  r.machine.build_type = "optimized";
  r.machine.features = {"blas", "avx2"};
  r.command = "./bin/matmul_bench --n 1024";
  r.date = "2025-01-31T12:00:00Z";
  r.add_metric("step_ms", std::vector<double>{12.5, 12.0, 13.25}, "ms", Better::Lower);
  r.add_metric("tokens_per_s", std::vector<double>{1000, 1100}, "tokens/s", Better::Higher);
  r.describe_column("ms", "ms", Better::Lower);
  r.add_row(Json(Json::Object{{"stage", "v1 naive"}, {"ms", 41.0}, {"gflops", 52.5}}));
  r.add_row(Json(Json::Object{{"stage", "v2 tiled"}, {"ms", 20.0}, {"gflops", 105.0}, {"valid", true}}));
  return r;
}

void expect_same(const BenchResult& a, const BenchResult& b) {
  EXPECT_EQ(a.bench, b.bench);
  EXPECT_EQ(a.machine, b.machine);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.date, b.date);
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  for (size_t i = 0; i < a.metrics.size(); ++i) {
    EXPECT_EQ(a.metrics[i].name, b.metrics[i].name);
    EXPECT_EQ(a.metrics[i].unit, b.metrics[i].unit);
    EXPECT_EQ(a.metrics[i].better, b.metrics[i].better);
    EXPECT_EQ(a.metrics[i].summary.count, b.metrics[i].summary.count);
    EXPECT_EQ(a.metrics[i].summary.median, b.metrics[i].summary.median);
    EXPECT_EQ(a.metrics[i].summary.min, b.metrics[i].summary.min);
    EXPECT_EQ(a.metrics[i].summary.max, b.metrics[i].summary.max);
    EXPECT_EQ(a.metrics[i].summary.mean, b.metrics[i].summary.mean);
    EXPECT_EQ(a.metrics[i].summary.stddev, b.metrics[i].summary.stddev);
  }
  ASSERT_EQ(a.columns.size(), b.columns.size());
  EXPECT_EQ(a.columns[0].name, b.columns[0].name);
  EXPECT_EQ(a.columns[0].better, b.columns[0].better);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) EXPECT_EQ(a.rows[i].dump(), b.rows[i].dump());
}

TEST(BenchResult, JsonRoundTrip) {
  const BenchResult r = sample_result();
  const Json j = r.to_json();
  EXPECT_EQ(j.at("metrics").at("step_ms").at("median").as_number(), 12.5);
  EXPECT_EQ(j.at("metrics").at("step_ms").at("min").as_number(), 12.0);
  EXPECT_EQ(j.at("metrics").at("step_ms").at("max").as_number(), 13.25);
  EXPECT_EQ(j.at("metrics").at("step_ms").at("unit").as_string(), "ms");
  EXPECT_EQ(j.at("metrics").at("tokens_per_s").at("better").as_string(), "higher");
  EXPECT_EQ(j.at("rows").as_array()[1].at("stage").as_string(), "v2 tiled");
  expect_same(r, BenchResult::from_json(Json::parse(j.dump())));
}

TEST(BenchResult, FileRoundTrip) {
  const std::string path = scratch_directory() + "/result.json";
  const BenchResult r = sample_result();
  r.write(path);
  expect_same(r, BenchResult::read(path));
}

TEST(BenchResult, AddMetricReplacesByName) {
  BenchResult r = sample_result();
  r.add_metric("step_ms", std::vector<double>{1.0}, "ms", Better::Lower);
  EXPECT_EQ(r.metrics.size(), 2u);
  EXPECT_EQ(r.find_metric("step_ms")->summary.median, 1.0);
  EXPECT_EQ(r.find_metric("absent"), nullptr);
}

TEST(BenchResult, RowsMustBeFlat) {
  BenchResult r;
  expect_error(
      [&] {
        r.add_row(Json(Json::Object{{"stage", "v1"}, {"nested", Json::object()}}));
      },
      ErrorKind::InvalidArgument, {"nested", "flat"});
  expect_error([&] { r.add_row(Json::object()); }, ErrorKind::InvalidArgument, {"non-empty"});
  expect_error([&] { r.add_row(Json(3)); }, ErrorKind::InvalidArgument);
}

TEST(BenchResult, ReadErrorsNameTheFileAndTheKey) {
  const std::string dir = scratch_directory();
  expect_error([&] { BenchResult::read(dir + "/absent.json"); }, ErrorKind::Io, {"absent.json"});

  write_file_atomic(dir + "/corrupt.json", "{\"bench\": ");
  expect_error([&] { BenchResult::read(dir + "/corrupt.json"); }, ErrorKind::Format, {"corrupt.json", "JSON"});

  Json j = sample_result().to_json();
  Json metric = j.at("metrics").at("step_ms");
  metric.as_object().erase(metric.as_object().begin());  // drop "median"
  Json metrics = j.at("metrics");
  metrics.set("step_ms", metric);
  j.set("metrics", metrics);
  write_file_atomic(dir + "/no_median.json", j.dump());
  expect_error([&] { BenchResult::read(dir + "/no_median.json"); }, ErrorKind::Format,
               {"no_median.json", "metrics.step_ms", "median"});

  Json bad_row = sample_result().to_json();
  Json rows = bad_row.at("rows");
  rows.push_back(Json(Json::Object{{"stage", "v3"}, {"inner", Json::array()}}));
  bad_row.set("rows", rows);
  write_file_atomic(dir + "/bad_row.json", bad_row.dump());
  expect_error([&] { BenchResult::read(dir + "/bad_row.json"); }, ErrorKind::Format, {"rows[2]", "inner"});

  Json bad_machine = sample_result().to_json();
  Json machine = bad_machine.at("machine");
  machine.set("cpu_cores", "eight");
  bad_machine.set("machine", machine);
  write_file_atomic(dir + "/bad_machine.json", bad_machine.dump());
  expect_error([&] { BenchResult::read(dir + "/bad_machine.json"); }, ErrorKind::Format, {"machine.cpu_cores"});
}

TEST(BenchResult, CommandLineIsQuotedForTheShell) {
  const char* args[] = {"./bin/bench", "--name", "two words", "--pattern=it's", "--n=3"};
  EXPECT_EQ(command_line(5, const_cast<char**>(args)), "./bin/bench --name 'two words' '--pattern=it'\\''s' --n=3");
}

TEST(BenchResult, DateIsIso8601Utc) {
  EXPECT_TRUE(std::regex_match(iso8601_utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << iso8601_utc_now();
}

TEST(Machine, DescribesThisMachine) {
  const MachineInfo m = describe_machine();
  EXPECT_FALSE(m.cpu_model.empty());
  EXPECT_GT(m.cpu_cores, 0);
  EXPECT_GT(m.threads, 0);
  EXPECT_GT(m.memory_bytes, 0);
  EXPECT_FALSE(m.os.empty());
  EXPECT_FALSE(m.compiler.empty());
  EXPECT_EQ(MachineInfo::from_json(m.to_json()), m);
}

TEST(Machine, GpuDescriberFillsTheGpuFields) {
  set_gpu_describer([](MachineInfo& m) {
    m.gpu_count = 2;
    m.gpu_name = "Test GPU";
    m.gpu_driver = "1.2";
  });
  const MachineInfo with_gpu = describe_machine();
  set_gpu_describer({});
  EXPECT_EQ(with_gpu.gpu_count, 2);
  EXPECT_EQ(with_gpu.gpu_name, "Test GPU");
  EXPECT_NE(with_gpu.summary().find("2 x Test GPU"), std::string::npos) << with_gpu.summary();
  EXPECT_EQ(describe_machine().gpu_count, 0);
}

TEST(BenchResult, StartRecordsTheRun) {
  const char* args[] = {"./bin/bench", "--repeats", "5"};
  const BenchResult r = BenchResult::start("demo", 3, const_cast<char**>(args));
  EXPECT_EQ(r.bench, "demo");
  EXPECT_EQ(r.command, "./bin/bench --repeats 5");
  EXPECT_EQ(r.machine.cpu_model, describe_machine().cpu_model);
  EXPECT_EQ(r.date.size(), 20u);
}

}  // namespace
}  // namespace lab::bench
