// Validating, timing and comparing the versions of a kernel (see kernel_lab.h); the report is in
// kernel_lab_report.cpp.
#include "common/lab/kernel_lab.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <optional>

#include "common/core/error.h"
#include "common/lab/device_timing.h"

namespace lab::kernel_lab {

Check Check::close(std::string name, Tensor actual, Tensor expected, Tolerance tol) {
  Check check;
  check.name = std::move(name);
  check.actual = std::move(actual);
  check.expected = std::move(expected);
  check.tol = tol;
  return check;
}

Check Check::low_precision(std::string name, Tensor actual, Tensor baseline, Tensor exact, DType output_dtype,
                           double factor, double allowance) {
  Check check;
  check.name = std::move(name);
  check.actual = std::move(actual);
  check.expected = std::move(exact);
  check.baseline = std::move(baseline);
  check.output_dtype = output_dtype;
  check.factor = factor;
  check.allowance = allowance;
  return check;
}

CheckOutcome evaluate(const Check& check) {
  if (check.baseline.defined()) {
    const ErrorRatioReport r = compare_error_to_baseline(check.actual, check.baseline, check.expected,
                                                         check.output_dtype, check.factor, check.allowance);
    return {check.name, r.ok(), r.describe(check.name)};
  }
  const CloseReport r = compare_close(check.actual, check.expected, check.tol);
  return {check.name, r.ok(), r.describe(check.name)};
}

std::string Validation::describe() const {
  if (!error.empty()) return "error: " + error;
  if (checks.empty()) return "validate() returned no checks: nothing was compared with the reference";
  if (passed) return "ok";
  std::string text;
  for (const CheckOutcome& c : checks)
    if (!c.passed) text += (text.empty() ? "" : "\n") + c.detail;
  return text;
}

namespace {

Validation validate_version(const Version& version) {
  Validation v;
  if (!version.left_out.empty()) {
    v.error = cat("left out: ", version.left_out);
    return v;
  }
  try {
    for (const Check& check : version.validate()) v.checks.push_back(evaluate(check));
  } catch (const std::exception& e) {
    v.error = e.what();
  }
  v.passed = v.error.empty() && !v.checks.empty() &&
             std::all_of(v.checks.begin(), v.checks.end(), [](const CheckOutcome& c) { return c.passed; });
  return v;
}

std::optional<double> fraction(double achieved, double ceiling) {
  if (ceiling <= 0 || achieved <= 0) return std::nullopt;
  return achieved / ceiling;
}

}  // namespace

void compare_with_earlier(std::vector<VersionReport>& reports) {
  // Per timing backend: CUDA-event times and steady-clock times are different clocks, and emulated times are
  // no GPU's, so a version is only compared with versions timed the same way.
  std::map<std::string, const VersionReport*> first, previous;
  for (VersionReport& r : reports) {
    r.previous = 0;
    r.speedup_vs_previous.reset();
    r.speedup_vs_first.reset();
    r.verdict_vs_previous = bench::Verdict::WithinSpread;
    if (!r.timed) continue;
    if (const VersionReport* p = previous[r.timing]) {
      r.previous = p->number;
      r.speedup_vs_previous = p->ms.median / r.ms.median;
      r.verdict_vs_previous = bench::compare(p->ms, r.ms, bench::Better::Lower).verdict;
    }
    if (const VersionReport* f = first[r.timing])
      r.speedup_vs_first = f->ms.median / r.ms.median;
    else
      first[r.timing] = &r;
    previous[r.timing] = &r;
  }
}

void apply_cost(VersionReport& report, const Cost& cost) {
  const double seconds = report.ms.median / 1e3;
  report.gb_per_s = seconds > 0 ? cost.bytes / seconds / 1e9 : 0;
  report.tflop_per_s = seconds > 0 ? cost.flops / seconds / 1e12 : 0;
  report.flops_fraction.reset();
  report.bandwidth_fraction.reset();
  if (!report.ceiling) return;
  report.flops_fraction = fraction(report.tflop_per_s * 1e12, report.ceiling->flops_per_s);
  report.bandwidth_fraction = fraction(report.gb_per_s * 1e9, report.ceiling->bytes_per_s);
}

KernelLab::KernelLab(std::string name, std::string problem, Cost cost)
    : name_(std::move(name)), problem_(std::move(problem)), cost_(cost) {
  LAB_CHECK(!name_.empty(), InvalidArgument, "KernelLab: a lab needs a name");
  LAB_CHECK(cost_.flops >= 0 && cost_.bytes >= 0, InvalidArgument, "KernelLab ", name_,
            ": FLOPs and bytes must not be negative");
}

void KernelLab::add(Version version) {
  const int number = static_cast<int>(versions_.size()) + 1;
  LAB_CHECK(!version.name.empty(), InvalidArgument, "KernelLab ", name_, ": version ", number, " has no name");
  LAB_CHECK(version.run && version.validate, InvalidArgument, "KernelLab ", name_, ": version ", number, " (",
            version.name, ") needs both a run and a validate function");
  versions_.push_back(std::move(version));
}

std::vector<int> KernelLab::selected(const std::vector<int>& only) const {
  std::vector<int> numbers = only;
  if (numbers.empty())
    for (int i = 1; i <= static_cast<int>(versions_.size()); ++i) numbers.push_back(i);
  for (const int n : numbers)
    LAB_CHECK(n >= 1 && n <= static_cast<int>(versions_.size()), InvalidArgument, "lab ", name_,
              ": there is no version ", n, " (it has ", versions_.size(), ")");
  return numbers;
}

VersionReport KernelLab::report_of(int number) const {
  selected({number});  // Error(InvalidArgument) for a number that is no version
  const Version& v = versions_[static_cast<size_t>(number - 1)];
  VersionReport r;
  r.number = number;
  r.name = v.name;
  r.what_changes = v.what_changes;
  r.device = v.device;
  r.precision = v.precision;
  r.left_out = v.left_out;
  return r;
}

std::vector<Validation> KernelLab::validate_all(const std::vector<int>& only) const {
  std::vector<Validation> results;
  for (const int n : selected(only)) results.push_back(validate_version(versions_[static_cast<size_t>(n - 1)]));
  return results;
}

std::vector<VersionReport> KernelLab::measure(const MeasureOptions& options) const {
  LAB_CHECK(options.warmup >= 0 && options.repeats >= 1, InvalidArgument, "lab ", name_,
            ": warmup must be >= 0 and repeats >= 1");
  std::vector<VersionReport> reports;
  for (const int n : selected(options.only)) {
    reports.push_back(report_of(n));
    if (reports.back().left_out.empty())
      reports.back().validation = validate_version(versions_[static_cast<size_t>(n - 1)]);
  }
  std::optional<CpuCeilingMeter> cpu_meter;  // made for the first CPU version timed, sized by the lab's bytes
  for (VersionReport& r : reports) {
    if (!r.validation.passed) continue;
    const Version& v = versions_[static_cast<size_t>(r.number - 1)];
    if (v.device.is_cpu() && options.cpu_ceiling) {
      if (!cpu_meter) cpu_meter.emplace(cost_.bytes);
      cpu_meter->sample(kCpuCeilingSamplesPerVisit);
    }
    try {
      const std::unique_ptr<bench::TimingBackend> timing = timing_for(v.device, {options.flush_l2});
      r.timing = timing->name();
      std::vector<double> ms = bench::measure(v.run, options.warmup, options.repeats, *timing);
      for (double& t : ms) t *= 1e3;
      r.ms = bench::summarize(ms);
      r.timed = true;
    } catch (const std::exception& e) {
      r.validation.passed = false;
      r.validation.error = cat("while timing: ", e.what());
      continue;
    }
    if (!v.device.is_cpu() && r.timing != "emulated") r.ceiling = gpu_ceiling(device_name(v.device), v.precision);
  }
  // The CPU versions share one ceiling: the fastest samples of the whole lab, the last ones taken after every
  // CPU version has run.
  if (cpu_meter) {
    cpu_meter->sample(kCpuCeilingSamplesPerVisit);
    const Ceiling ceiling = cpu_meter->ceiling();
    for (VersionReport& r : reports)
      if (r.timed && r.device.is_cpu()) r.ceiling = ceiling;
  }
  for (VersionReport& r : reports)
    if (r.timed) apply_cost(r, cost_);
  compare_with_earlier(reports);
  return reports;
}

}  // namespace lab::kernel_lab
