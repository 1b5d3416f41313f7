// The report of a kernel lab: a text table for people, rows and metrics of a bench result for bench_diff and
// the plots (see kernel_lab.h).
#include <cstdio>
#include <set>

#include "common/bench/text_table.h"
#include "common/lab/kernel_lab.h"

namespace lab::kernel_lab {

namespace {

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// 4 significant digits: kernels run from microseconds to seconds.
std::string significant(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// 2.15e9 FLOP -> "2.15 GFLOP".
std::string with_prefix(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (i < 5 && v >= 1000) {
    v /= 1000;
    ++i;
  }
  return cat(significant(v), " ", prefixes[i], unit);
}

// A fraction of the ceiling above 1 means the ceiling was measured (or, for a GPU, rated) lower than the kernel
// ran: it is printed, flagged with a `*` that the table's notes explain.
bool above_ceiling(const std::optional<double>& f) {
  return f && *f > 1.0;
}

std::string percent(const std::optional<double>& f) {
  return f ? cat(fixed(*f * 100, 1), "%", above_ceiling(f) ? "*" : "") : "-";
}

std::string speedup(const std::optional<double>& s) {
  return s ? cat(fixed(*s, 2), "x") : "-";
}

std::string version_label(int number) {
  return cat("v", number);
}

Json optional_number(const std::optional<double>& v) {
  return v ? Json(*v) : Json();
}

}  // namespace

std::string KernelLab::table(const std::vector<VersionReport>& reports) const {
  std::string out = cat(name_, " lab: ", problem_, "; per run ", with_prefix(cost_.flops, "FLOP"), ", ",
                        with_prefix(cost_.bytes, "B"), " moved (analytic, the same for every version)\n");
  for (const VersionReport& r : reports)
    out += cat("  ", version_label(r.number), "  ", r.name, r.what_changes.empty() ? "" : ": ", r.what_changes, "\n");

  bench::TextTable t;
  t.add({"", "device", "prec", "timing", "median ms", "[min, max]", "GB/s", "TFLOP/s", "% peak FLOP", "% peak BW",
         "vs previous", "vs first"});
  for (const VersionReport& r : reports) {
    std::vector<std::string> row = {version_label(r.number), r.device.str(), bench::precision_name(r.precision)};
    if (!r.timed) {
      row.push_back(!r.left_out.empty() ? "left out" : r.validation.passed ? "validated, not timed" : "FAILED");
      t.add(row);
      continue;
    }
    row.push_back(r.timing);
    row.push_back(significant(r.ms.median));
    row.push_back(cat("[", significant(r.ms.min), ", ", significant(r.ms.max), "]"));
    row.push_back(fixed(r.gb_per_s, 1));
    row.push_back(fixed(r.tflop_per_s, 3));
    row.push_back(percent(r.flops_fraction));
    row.push_back(percent(r.bandwidth_fraction));
    row.push_back(r.speedup_vs_previous ? cat(speedup(r.speedup_vs_previous), " vs ", version_label(r.previous), " (",
                                              bench::verdict_name(r.verdict_vs_previous), ")")
                                        : "-");
    row.push_back(speedup(r.speedup_vs_first));
    t.add(row);
  }
  out += t.render("  ");

  std::set<std::string> ceilings, timings, flagged;
  for (const VersionReport& r : reports) {
    if (r.ceiling) ceilings.insert(cat(r.device.str(), " ", bench::precision_name(r.precision), ": ", r.ceiling->name));
    if (r.timed) timings.insert(r.timing);
    if (above_ceiling(r.flops_fraction) || above_ceiling(r.bandwidth_fraction))
      flagged.insert(r.device.is_cpu() ? "cpu" : "gpu");
  }
  for (const std::string& c : ceilings) out += cat("  peak ", c, "\n");
  if (flagged.count("cpu"))
    out +=
        "  * above 100% on the CPU: its ceiling was measured lower than the kernel ran, so the machine was "
        "probably loaded while the ceiling was measured (for % peak FLOP, a GEMM larger than the ceiling's "
        "1024^3 also runs a little faster)\n";
  if (flagged.count("gpu"))
    out +=
        "  * above 100% on the GPU: the datasheet peak is lower than the kernel ran, so it moved or computed less "
        "than the analytic count (bytes found in a cache), or the table's entry is not this GPU's\n";
  if (timings.count("emulated"))
    out +=
        "  emulated: the CUDA versions ran in the CUDA emulation build; their times are CPU times and say nothing "
        "about a GPU (no fraction of peak is given)\n";
  for (const VersionReport& r : reports) {
    if (!r.left_out.empty())
      out += cat("  left out ", version_label(r.number), " ", r.name, ": ", r.left_out, "\n");
    else if (!r.validation.passed)
      out += cat("  FAILED ", version_label(r.number), " ", r.name, ": ", r.validation.describe(), "\n");
  }
  return out;
}

void KernelLab::add_to(bench::BenchResult& result, const std::vector<VersionReport>& reports) const {
  for (const char* ms : {"ms_median", "ms_min", "ms_max"}) result.describe_column(ms, "ms", bench::Better::Lower);
  result.describe_column("gb_per_s", "GB/s", bench::Better::Higher);
  result.describe_column("tflop_per_s", "TFLOP/s", bench::Better::Higher);
  result.describe_column("flops_fraction", "fraction", bench::Better::Higher);
  result.describe_column("bandwidth_fraction", "fraction", bench::Better::Higher);
  result.describe_column("speedup_vs_previous", "ratio", bench::Better::Higher);
  result.describe_column("speedup_vs_first", "ratio", bench::Better::Higher);
  for (const VersionReport& r : reports) {
    Json row = Json::object();
    row.set("version", cat(version_label(r.number), " ", r.name));  // the label bench_diff pairs rows by
    row.set("number", r.number);
    row.set("what_changes", r.what_changes);
    row.set("problem", problem_);
    row.set("device", r.device.str());
    row.set("precision", bench::precision_name(r.precision));
    row.set("status", !r.left_out.empty()    ? "left out"
                      : !r.validation.passed ? "FAILED"
                      : r.timed              ? "ok"
                                             : "validated, not timed");
    row.set("failure", r.validation.passed || !r.left_out.empty() ? Json() : Json(r.validation.describe()));
    row.set("left_out", r.left_out.empty() ? Json() : Json(r.left_out));
    row.set("timing", r.timed ? Json(r.timing) : Json());
    row.set("ms_median", r.timed ? Json(r.ms.median) : Json());
    row.set("ms_min", r.timed ? Json(r.ms.min) : Json());
    row.set("ms_max", r.timed ? Json(r.ms.max) : Json());
    row.set("flops", cost_.flops);
    row.set("bytes", cost_.bytes);
    row.set("gb_per_s", r.timed ? Json(r.gb_per_s) : Json());
    row.set("tflop_per_s", r.timed ? Json(r.tflop_per_s) : Json());
    row.set("peak", r.ceiling ? Json(r.ceiling->name) : Json());
    row.set("flops_fraction", optional_number(r.flops_fraction));
    row.set("bandwidth_fraction", optional_number(r.bandwidth_fraction));
    row.set("previous", r.previous > 0 ? Json(version_label(r.previous)) : Json());
    row.set("speedup_vs_previous", optional_number(r.speedup_vs_previous));
    row.set("verdict_vs_previous", r.speedup_vs_previous ? Json(bench::verdict_name(r.verdict_vs_previous)) : Json());
    row.set("speedup_vs_first", optional_number(r.speedup_vs_first));
    result.add_row(row);
    if (r.timed) result.add_metric(cat(version_label(r.number), "_ms"), r.ms, "ms", bench::Better::Lower);
  }
}

}  // namespace lab::kernel_lab
