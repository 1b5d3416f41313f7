// The shared command line of kernel labs and their run (see lab_main.h).
#include "common/lab/lab_main.h"

#include <algorithm>
#include <cstdio>

#include "common/core/error.h"

namespace lab::kernel_lab {

void LabCommandLine::register_flags(Flags& flags) {
  flags.add_string("version", &versions, "run only these versions: a number or a list such as 2,3 (default: all)");
  flags.add_bool("validate-only", &validate_only, "validate the versions against the reference, do not time them");
  flags.add_int("warmup", &warmup, "untimed runs of each version before timing", 0, 1000);
  flags.add_int("repeats", &repeats, "timed runs of each version (median, min and max reported)", 1, 100000);
  flags.add_bool("flush-l2", &flush_l2, "CUDA versions: flush the L2 cache before each timed run");
  flags.add_bool("cpu-ceiling", &cpu_ceiling,
                 "CPU versions: measure this CPU's sgemm and copy throughput for the fraction of peak");
  flags.add_string("json", &json, "write the result here (bench JSON: one row per version)");
  flags.add_bool("quick", &quick,
                 "a run of seconds: a smaller problem, 1 warm-up, 3 repeats (unless given): to check, not to publish");
}

bool LabCommandLine::parse(Flags& flags, int argc, char** argv) {
  if (!flags.parse(argc, argv)) return false;
  if (quick) {
    if (!flags.was_set("warmup")) warmup = 1;
    if (!flags.was_set("repeats")) repeats = 3;
  }
  parse_version_list(versions);
  if (!json.empty()) bench::BenchResult::check_destination(json);
  command = bench::command_line(argc, argv);
  return true;
}

MeasureOptions LabCommandLine::measure_options() const {
  MeasureOptions options;
  options.warmup = static_cast<int>(warmup);
  options.repeats = static_cast<int>(repeats);
  options.flush_l2 = flush_l2;
  options.cpu_ceiling = cpu_ceiling;
  options.only = parse_version_list(versions);
  return options;
}

std::vector<int> parse_version_list(const std::string& text) {
  std::vector<int> numbers;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const bool digits = !item.empty() && item.size() < 6 && item.find_first_not_of("0123456789") == std::string::npos;
    LAB_CHECK(digits && std::stoi(item) > 0, InvalidArgument, "--version: '", item,
              "' is not a version number (give 1, 2, ... or a list such as 2,3)");
    numbers.push_back(std::stoi(item));
    pos = comma + 1;
  }
  LAB_CHECK(text.empty() || text.back() != ',', InvalidArgument, "--version: '", text, "' ends with a comma");
  return numbers;
}

int run_lab(const KernelLab& lab, const LabCommandLine& command_line) {
  const MeasureOptions options = command_line.measure_options();
  std::vector<VersionReport> reports;
  if (command_line.validate_only) {
    const std::vector<Validation> validations = lab.validate_all(options.only);
    for (size_t i = 0; i < validations.size(); ++i) {
      VersionReport r = lab.report_of(options.only.empty() ? static_cast<int>(i) + 1 : options.only[i]);
      r.validation = validations[i];
      std::printf("v%d %s: %s\n", r.number, r.name.c_str(),
                  !r.left_out.empty()   ? "left out"
                  : r.validation.passed ? "ok"
                                        : "FAILED");
      if (!r.validation.passed)
        std::printf("  %s\n", !r.left_out.empty() ? r.left_out.c_str() : r.validation.describe().c_str());
      reports.push_back(std::move(r));
    }
  } else {
    reports = lab.measure(options);
    std::fputs(lab.table(reports).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!command_line.json.empty()) {
    bench::BenchResult result = bench::BenchResult::start(lab.name() + "_lab", 0, nullptr);
    result.command = command_line.command;
    lab.add_to(result, reports);
    result.write(command_line.json);
    std::printf("wrote %s\n", command_line.json.c_str());
  }
  for (const VersionReport& r : reports)
    if (!r.validation.passed && r.left_out.empty()) return 1;
  return 0;
}

}  // namespace lab::kernel_lab
