// The kernel lab harness on a toy kernel (y = 2x + 1 on the CPU): a correct version passes and is timed, a
// deliberately wrong one is reported FAILED with its first bad element and is not timed, the speedups compare
// each timed version with the one before it and the first, and the bench result holds one row per version.
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/lab/device_timing.h"
#include "common/lab/kernel_lab.h"
#include "common/lab/lab_main.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"

namespace lab::kernel_lab {
namespace {

constexpr int64_t kN = 4096;

// The toy problem: its input, the CPU reference's output, and the output every version writes.
struct AxpbProblem {
  Tensor x, expected, out;

  AxpbProblem() {
    Rng rng(11);
    std::vector<float> values(kN), reference(kN);
    for (int64_t i = 0; i < kN; ++i) {
      values[static_cast<size_t>(i)] = rng.normal();
      reference[static_cast<size_t>(i)] = 2.0f * values[static_cast<size_t>(i)] + 1.0f;
    }
    x = Tensor::from_floats(values, {kN});
    expected = Tensor::from_floats(reference, {kN});
    out = Tensor::zeros({kN}, DType::F32);
  }

  // A version computing elements [0, end) of the output.
  Version version(std::string name, int64_t end) {
    auto compute = [this, end] {
      const float* in = x.data<float>();
      float* o = out.data<float>();
      for (int64_t i = 0; i < end; ++i) o[i] = 2.0f * in[i] + 1.0f;
    };
    return {std::move(name), "", Device::cpu(), bench::Precision::FP32, compute, [this, compute] {
              out.copy_from(poisoned({kN}, Device::cpu()));
              compute();
              return std::vector<Check>{Check::close("y", out, expected, tolerance_for(DType::F32, 1))};
            }};
  }
};

KernelLab toy_lab(AxpbProblem& p) {
  KernelLab lab("axpb", "N=4096", {2.0 * kN, 8.0 * kN});
  lab.add(p.version("loop", kN));
  lab.add(p.version("off by one", kN - 1));  // leaves the last element unwritten
  lab.add(p.version("loop again", kN));
  return lab;
}

MeasureOptions quick() {
  MeasureOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.cpu_ceiling = false;
  return o;
}

TEST(KernelLab, AWrongVersionFailsValidationNamingItsFirstBadElement) {
  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  const std::vector<Validation> v = lab.validate_all();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(v[0].passed) << v[0].describe();
  EXPECT_FALSE(v[1].passed);
  EXPECT_TRUE(v[2].passed) << v[2].describe();
  const std::string why = v[1].describe();
  EXPECT_NE(why.find("y: 1 of 4096 elements differ"), std::string::npos) << why;
  EXPECT_NE(why.find("[4095] nan"), std::string::npos) << why;
  // Only the selected versions, in the order asked.
  const std::vector<Validation> only = lab.validate_all({3, 2});
  ASSERT_EQ(only.size(), 2u);
  EXPECT_TRUE(only[0].passed);
  EXPECT_FALSE(only[1].passed);
  testing::expect_error([&] { lab.validate_all({4}); }, ErrorKind::InvalidArgument, {"no version 4", "it has 3"});
}

TEST(KernelLab, AFailedVersionIsNotTimedAndTheNextIsComparedWithTheLastTimedOne) {
  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  const std::vector<VersionReport> r = lab.measure(quick());
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].timed);
  EXPECT_FALSE(r[1].timed);
  EXPECT_TRUE(r[2].timed);
  EXPECT_EQ(r[0].timing, "steady_clock");
  EXPECT_EQ(r[0].ms.count, 3);
  EXPECT_GT(r[0].ms.median, 0.0);
  EXPECT_FALSE(r[0].speedup_vs_previous.has_value());
  EXPECT_EQ(r[2].previous, 1);
  ASSERT_TRUE(r[2].speedup_vs_previous.has_value());
  EXPECT_DOUBLE_EQ(*r[2].speedup_vs_previous, r[0].ms.median / r[2].ms.median);
  EXPECT_DOUBLE_EQ(*r[2].speedup_vs_first, r[0].ms.median / r[2].ms.median);
  // GB/s and TFLOP/s from the lab's cost at the median time.
  EXPECT_DOUBLE_EQ(r[0].gb_per_s, 8.0 * kN / (r[0].ms.median / 1e3) / 1e9);
  EXPECT_DOUBLE_EQ(r[0].tflop_per_s, 2.0 * kN / (r[0].ms.median / 1e3) / 1e12);
  EXPECT_FALSE(r[0].ceiling.has_value());  // not measured when asked not to

  const std::string table = lab.table(r);
  EXPECT_NE(table.find("axpb lab: N=4096; per run 8.192 kFLOP, 32.77 kB moved"), std::string::npos) << table;
  EXPECT_NE(table.find("FAILED v2 off by one: y: 1 of 4096"), std::string::npos) << table;
  EXPECT_NE(table.find(" vs v1 ("), std::string::npos) << table;
}

TEST(KernelLab, ThrowingAndEmptyValidationsFail) {
  KernelLab lab("broken", "-", {});
  lab.add({"throws", "", Device::cpu(), bench::Precision::FP32, [] {},
           []() -> std::vector<Check> { throw std::runtime_error("launch failed"); }});
  lab.add({"checks nothing", "", Device::cpu(), bench::Precision::FP32, [] {}, [] { return std::vector<Check>{}; }});
  const std::vector<Validation> v = lab.validate_all();
  EXPECT_FALSE(v[0].passed);
  EXPECT_EQ(v[0].describe(), "error: launch failed");
  EXPECT_FALSE(v[1].passed);
  EXPECT_NE(v[1].describe().find("no checks"), std::string::npos);
  testing::expect_error(
      [&] {
        lab.add({"no code", "", Device::cpu(), bench::Precision::FP32, {}, {}});
      },
      ErrorKind::InvalidArgument, {"version 3 (no code)", "run and a validate"});
}

VersionReport timed_report(int number, double median, double min, double max) {
  VersionReport r;
  r.number = number;
  r.timed = true;
  r.timing = "steady_clock";
  r.validation.passed = true;
  const std::vector<double> samples = {min, median, max};
  r.ms = bench::summarize(samples);
  return r;
}

TEST(KernelLab, SpeedupsAndVerdictsFollowTheMediansAndTheSpread) {
  std::vector<VersionReport> r = {timed_report(1, 10.0, 9.9, 10.1), timed_report(2, 5.0, 4.9, 5.1), VersionReport{},
                                  timed_report(4, 4.95, 4.5, 5.5)};
  r[2].number = 3;  // failed, not timed
  compare_with_earlier(r);
  EXPECT_FALSE(r[0].speedup_vs_previous.has_value());
  EXPECT_FALSE(r[0].speedup_vs_first.has_value());
  EXPECT_DOUBLE_EQ(*r[1].speedup_vs_previous, 2.0);
  EXPECT_EQ(r[1].verdict_vs_previous, bench::Verdict::Gain);
  EXPECT_FALSE(r[2].speedup_vs_previous.has_value());
  EXPECT_EQ(r[3].previous, 2);
  EXPECT_DOUBLE_EQ(*r[3].speedup_vs_previous, 5.0 / 4.95);
  EXPECT_EQ(r[3].verdict_vs_previous, bench::Verdict::WithinSpread);  // 0.05 ms apart, spread 1 ms
  EXPECT_DOUBLE_EQ(*r[3].speedup_vs_first, 10.0 / 4.95);

  std::vector<VersionReport> slower = {timed_report(1, 5.0, 4.9, 5.1), timed_report(2, 10.0, 9.9, 10.1)};
  compare_with_earlier(slower);
  EXPECT_DOUBLE_EQ(*slower[1].speedup_vs_previous, 0.5);
  EXPECT_EQ(slower[1].verdict_vs_previous, bench::Verdict::Regression);
}

TEST(KernelLab, VersionsAreComparedOnlyWithVersionsTimedTheSameWay) {
  std::vector<VersionReport> r = {timed_report(1, 100.0, 100.0, 100.0), timed_report(2, 10.0, 10.0, 10.0),
                                  timed_report(3, 5.0, 5.0, 5.0), timed_report(4, 50.0, 50.0, 50.0)};
  r[1].timing = r[2].timing = "cuda_events";  // v1 and v4 on the CPU, v2 and v3 on a GPU
  compare_with_earlier(r);
  EXPECT_FALSE(r[1].speedup_vs_previous.has_value());  // the first GPU version: nothing timed alike before it
  EXPECT_FALSE(r[1].speedup_vs_first.has_value());
  EXPECT_EQ(r[2].previous, 2);
  EXPECT_DOUBLE_EQ(*r[2].speedup_vs_first, 2.0);
  EXPECT_EQ(r[3].previous, 1);
  EXPECT_DOUBLE_EQ(*r[3].speedup_vs_previous, 2.0);
  EXPECT_DOUBLE_EQ(*r[3].speedup_vs_first, 2.0);
}

TEST(KernelLab, FractionsOfTheCeilingComeFromTheCostAndTheMedian) {
  VersionReport r = timed_report(1, 2.0, 2.0, 2.0);
  r.ceiling = Ceiling{"test", 2e12, 400e9};
  apply_cost(r, {2e9, 4e8});
  EXPECT_DOUBLE_EQ(r.tflop_per_s, 1.0);
  EXPECT_DOUBLE_EQ(r.gb_per_s, 200.0);
  EXPECT_DOUBLE_EQ(*r.flops_fraction, 0.5);
  EXPECT_DOUBLE_EQ(*r.bandwidth_fraction, 0.5);
  r.ceiling = Ceiling{"FLOP/s only", 4e12, 0};
  apply_cost(r, {2e9, 4e8});
  EXPECT_DOUBLE_EQ(*r.flops_fraction, 0.25);
  EXPECT_FALSE(r.bandwidth_fraction.has_value());
}

TEST(KernelLab, GpuCeilingsComeFromTheDatasheetTablesAndNeverForAnEmulatedGpu) {
  const std::optional<Ceiling> h100 = gpu_ceiling("NVIDIA H100 80GB HBM3", bench::Precision::BF16);
  ASSERT_TRUE(h100.has_value());
  EXPECT_DOUBLE_EQ(h100->flops_per_s, 989.4e12);
  EXPECT_DOUBLE_EQ(h100->bytes_per_s, 3350e9);
  EXPECT_EQ(h100->name, "H100 SXM bf16, H100 SXM (HBM3)");
  // V100 has no bf16 math, but its bandwidth is known.
  const std::optional<Ceiling> v100 = gpu_ceiling("Tesla V100-SXM2-16GB", bench::Precision::BF16);
  ASSERT_TRUE(v100.has_value());
  EXPECT_EQ(v100->flops_per_s, 0.0);
  EXPECT_DOUBLE_EQ(v100->bytes_per_s, 900e9);
  EXPECT_FALSE(gpu_ceiling("Emulated NVIDIA H100 (LAB_CUDA_EMULATION)", bench::Precision::FP32).has_value());
}

TEST(TimingFor, TheCpuIsTimedWithTheSteadyClock) {
  EXPECT_EQ(timing_for(Device::cpu())->name(), "steady_clock");
#ifndef LAB_WITH_CUDA
  testing::expect_error([] { timing_for(Device::cuda()); }, ErrorKind::Unsupported, {"cuda:0", "no CUDA backend"});
#endif
}

// A ceiling is the fastest of its samples: a loaded machine only ever makes a run slower.
TEST(CpuCeiling, TheFastestSampleSetsTheRate) {
  EXPECT_DOUBLE_EQ(best_rate(2e9, std::vector<double>{0.04, 0.01, 0.02}), 2e11);
  EXPECT_DOUBLE_EQ(best_rate(1e6, std::vector<double>{0.0, 0.5, -1.0}), 2e6);  // no time is not a time
  EXPECT_EQ(best_rate(1e6, std::vector<double>{}), 0.0);                       // unknown
  EXPECT_EQ(best_rate(1e6, std::vector<double>{0.0}), 0.0);
}

// A kernel that moves 2 MiB per run is compared with a copy of 1 MiB (1 MiB read, 1 MiB written), whose data
// sit in the caches as the kernel's do; tiny and huge working sets are clamped to 64 KiB and 256 MiB.
TEST(CpuCeiling, TheCopyMovesTheKernelsBytes) {
  EXPECT_EQ(CpuCeilingMeter(2 << 20).copy_bytes(), size_t{1} << 20);
  EXPECT_EQ(CpuCeilingMeter(100).copy_bytes(), size_t{64} << 10);
  EXPECT_EQ(CpuCeilingMeter(1e12).copy_bytes(), size_t{256} << 20);
}

TEST(CpuCeiling, IsMeasuredSampleBySample) {
  CpuCeilingMeter meter(1 << 20);
  EXPECT_EQ(meter.samples(), 0);
  EXPECT_EQ(meter.ceiling().bytes_per_s, 0.0);  // unknown before a sample
  meter.sample(2);
  EXPECT_EQ(meter.samples(), 2);
  const Ceiling c = meter.ceiling();
  EXPECT_GT(c.flops_per_s, 1e8);  // any CPU of this century, even a loaded one
  EXPECT_GT(c.bytes_per_s, 1e8);
  EXPECT_NE(c.name.find("measured, best of 2: sgemm 1024^3"), std::string::npos) << c.name;
  EXPECT_NE(c.name.find("memcpy 512 KiB on "), std::string::npos) << c.name;
  EXPECT_NE(measure_cpu_ceiling(0, 1).name.find("memcpy 262144 KiB"), std::string::npos);  // from memory
}

// The CPU versions share one ceiling, sampled before each of them and after the last (v2 fails validation:
// it is neither timed nor sampled for).
TEST(KernelLab, TheCpuCeilingIsSampledBeforeEachCpuVersionAndAfterTheLast) {
  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  MeasureOptions options = quick();
  options.cpu_ceiling = true;
  const std::vector<VersionReport> r = lab.measure(options);
  ASSERT_TRUE(r[0].ceiling.has_value());
  ASSERT_TRUE(r[2].ceiling.has_value());
  EXPECT_FALSE(r[1].ceiling.has_value());
  EXPECT_EQ(r[0].ceiling->name, r[2].ceiling->name);
  EXPECT_NE(r[0].ceiling->name.find(cat("best of ", 3 * kCpuCeilingSamplesPerVisit)), std::string::npos)
      << r[0].ceiling->name;
  EXPECT_NE(r[0].ceiling->name.find("memcpy 64 KiB"), std::string::npos);  // the toy moves 32 KiB: clamped
  EXPECT_DOUBLE_EQ(*r[0].bandwidth_fraction, r[0].gb_per_s * 1e9 / r[0].ceiling->bytes_per_s);
}

// A fraction above 100% is printed, flagged, and explained under the table.
TEST(KernelLab, AFractionAboveTheCeilingIsFlagged) {
  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  std::vector<VersionReport> r = {timed_report(1, 1.0, 1.0, 1.0), timed_report(3, 1.0, 1.0, 1.0)};
  r[0].device = r[1].device = Device::cpu();
  r[0].ceiling = Ceiling{"measured", 1e12, 8.0 * kN / 2e-3};  // half what the kernel moved
  r[1].ceiling = Ceiling{"measured", 1e12, 8.0 * kN / 0.5e-3};
  for (VersionReport& v : r) apply_cost(v, lab.cost());
  const std::string table = lab.table(r);
  EXPECT_NE(table.find("200.0%*"), std::string::npos) << table;
  EXPECT_NE(table.find("50.0% "), std::string::npos) << table;
  EXPECT_EQ(table.find("50.0%*"), std::string::npos) << table;
  EXPECT_NE(table.find("* above 100% on the CPU: its ceiling was measured lower than the kernel ran"),
            std::string::npos)
      << table;
  r.pop_back();
  r[0].ceiling = Ceiling{"measured", 1e12, 8.0 * kN / 0.5e-3};
  apply_cost(r[0], lab.cost());
  EXPECT_EQ(lab.table(r).find("above 100%"), std::string::npos);
}

// A version left out at this size keeps its number, is neither validated nor timed, and is not a failure.
TEST(KernelLab, AVersionLeftOutIsListedButNeitherValidatedNorTimed) {
  AxpbProblem p;
  KernelLab lab("axpb", "N=4096", {2.0 * kN, 8.0 * kN});
  int runs = 0;
  lab.add(p.version("loop", kN));
  Version slow = p.version("slow loop", kN);
  slow.run = [&runs] { ++runs; };
  slow.validate = [&runs] {
    ++runs;
    return std::vector<Check>{};
  };
  slow.left_out = "too slow at this size: --slow runs it";
  lab.add(slow);

  const std::vector<VersionReport> r = lab.measure(quick());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].timed);
  EXPECT_FALSE(r[1].timed);
  EXPECT_EQ(r[1].number, 2);
  EXPECT_EQ(r[1].left_out, "too slow at this size: --slow runs it");
  EXPECT_EQ(runs, 0);
  const std::string table = lab.table(r);
  EXPECT_NE(table.find("left out v2 slow loop: too slow at this size: --slow runs it"), std::string::npos) << table;
  EXPECT_EQ(table.find("FAILED"), std::string::npos) << table;
  EXPECT_NE(lab.validate_all({2}).front().describe().find("left out: too slow"), std::string::npos);
  EXPECT_EQ(runs, 0);

  bench::BenchResult result = bench::BenchResult::start("axpb_lab", 0, nullptr);
  lab.add_to(result, r);
  EXPECT_EQ(result.rows[1].at("status").as_string(), "left out");
  EXPECT_TRUE(result.rows[1].at("failure").is_null());

  LabCommandLine command_line;
  command_line.warmup = 0;
  command_line.repeats = 1;
  command_line.cpu_ceiling = false;
  EXPECT_EQ(run_lab(lab, command_line), 0);
  command_line.validate_only = true;
  EXPECT_EQ(run_lab(lab, command_line), 0);
  EXPECT_EQ(runs, 0);
}

TEST(KernelLab, TheBenchResultHasOneRowPerVersionAndAMetricPerTimedOne) {
  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  const std::vector<VersionReport> reports = lab.measure(quick());
  bench::BenchResult result = bench::BenchResult::start("axpb_lab", 0, nullptr);
  lab.add_to(result, reports);
  // Through JSON and back, as bench_diff reads it.
  const bench::BenchResult back = bench::BenchResult::from_json(result.to_json());
  ASSERT_EQ(back.rows.size(), 3u);
  EXPECT_EQ(back.rows[0].as_object().front().first, "version");
  EXPECT_EQ(back.rows[0].at("version").as_string(), "v1 loop");
  EXPECT_EQ(back.rows[0].at("status").as_string(), "ok");
  EXPECT_EQ(back.rows[0].at("timing").as_string(), "steady_clock");
  EXPECT_EQ(back.rows[0].at("device").as_string(), "cpu");
  EXPECT_EQ(back.rows[0].at("precision").as_string(), "fp32");
  EXPECT_DOUBLE_EQ(back.rows[0].at("ms_median").as_number(), reports[0].ms.median);
  EXPECT_DOUBLE_EQ(back.rows[0].at("flops").as_number(), 2.0 * kN);
  EXPECT_TRUE(back.rows[0].at("speedup_vs_previous").is_null());
  EXPECT_EQ(back.rows[1].at("status").as_string(), "FAILED");
  EXPECT_TRUE(back.rows[1].at("ms_median").is_null());
  EXPECT_NE(back.rows[1].at("failure").as_string().find("[4095]"), std::string::npos);
  EXPECT_EQ(back.rows[2].at("previous").as_string(), "v1");
  EXPECT_DOUBLE_EQ(back.rows[2].at("speedup_vs_previous").as_number(), *reports[2].speedup_vs_previous);
  ASSERT_NE(back.find_metric("v1_ms"), nullptr);
  EXPECT_DOUBLE_EQ(back.find_metric("v1_ms")->summary.median, reports[0].ms.median);
  EXPECT_EQ(back.find_metric("v2_ms"), nullptr);
  ASSERT_NE(back.find_column("speedup_vs_first"), nullptr);
  EXPECT_EQ(back.find_column("speedup_vs_first")->better, bench::Better::Higher);
  EXPECT_EQ(back.find_column("ms_median")->better, bench::Better::Lower);
}

TEST(LabCommandLine, VersionListsAndTheExitStatus) {
  EXPECT_EQ(parse_version_list(""), std::vector<int>{});
  EXPECT_EQ(parse_version_list("2,3"), (std::vector<int>{2, 3}));
  for (const char* bad : {"0", "a", "2,", "1,,2", "-1"})
    testing::expect_error([&] { parse_version_list(bad); }, ErrorKind::InvalidArgument, {"--version"});

  AxpbProblem p;
  const KernelLab lab = toy_lab(p);
  const std::string json = testing::scratch_directory() + "/axpb.json";
  std::vector<std::string> args = {"axpb_lab", "--repeats", "2", "--warmup", "0", "--no-cpu-ceiling", "--json", json};
  auto run_with = [&](std::vector<std::string> a) {
    std::vector<char*> argv;
    for (std::string& s : a) argv.push_back(s.data());
    Flags flags("axpb_lab", "toy");
    LabCommandLine command_line;
    command_line.register_flags(flags);
    EXPECT_TRUE(command_line.parse(flags, static_cast<int>(argv.size()), argv.data()));
    return run_lab(lab, command_line);
  };
  EXPECT_EQ(run_with(args), 1);  // v2 fails
  const bench::BenchResult written = bench::BenchResult::read(json);
  EXPECT_EQ(written.bench, "axpb_lab");
  EXPECT_EQ(written.rows.size(), 3u);
  EXPECT_NE(written.command.find("--repeats 2"), std::string::npos);
  args.insert(args.end(), {"--version", "1,3"});
  EXPECT_EQ(run_with(args), 0);
  EXPECT_EQ(bench::BenchResult::read(json).rows.size(), 2u);
  args.push_back("--validate-only");
  EXPECT_EQ(run_with(args), 0);
  EXPECT_EQ(bench::BenchResult::read(json).rows[0].at("status").as_string(), "validated, not timed");
}

}  // namespace
}  // namespace lab::kernel_lab
