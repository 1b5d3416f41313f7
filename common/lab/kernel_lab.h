// A kernel lab: the numbered versions of one kernel side by side (v1 naive ... vN best, a vendor library as
// the ceiling where there is one), each validated against the CPU reference on fresh random inputs, then
// timed, and reported as time, GB/s, TFLOP/s, fraction of the device's peak and speedup over the version
// before it and over the first.
//
// A lab executable builds a KernelLab and hands it to run_lab() (lab_main.h), which gives every lab the same
// command line (--version, --repeats, --json, ...). In outline:
//
//     KernelLab lab("layernorm_forward", "B*T=4096 rows, C=768", {.flops = 8.0 * N * C, .bytes = 4.0 * ...});
//     lab.add({.name = "naive: one thread per row",
//              .what_changes = "the CPU loop moved to the GPU as it is",
//              .device = Device::cuda(), .precision = bench::Precision::FP32,
//              .run = [&] { v1_forward(x, w, b, out); },
//              .validate = [&] {
//                out.copy_from(poisoned(out.shape(), out.device()));   // an element left unwritten stays NaN
//                v1_forward(x, w, b, out);
//                return std::vector<Check>{Check::close("out", out, expected, tolerance_for(DType::F32, C))};
//              }});
//
// The inputs and the CPU reference's outputs (`expected`) are made once, from a seeded Rng, before the
// versions are added; every version reads the same inputs.
//
// What measure() does, version by version:
//   1. validate(): the version's checks, each judged by compare.h (closeness, or the low-precision rule for
//      bf16/fp16). A check that fails, or an exception (a CUDA fault, a bad launch), marks the version FAILED
//      with the first bad elements; a FAILED version is not timed.
//   2. timing: `warmup` untimed runs, then `repeats` runs each timed on its own: CPU versions with the steady
//      clock, CUDA versions with CUDA events around the run, the L2 cache flushed before each repeat (a kernel
//      that finds its inputs in a warm L2 would be timed on the cache, not on memory). In the CUDA emulation
//      build the same code runs but the times are CPU times: they are marked "emulated" and never compared
//      with a GPU's peak.
//   3. numbers from the lab's Cost (the analytic FLOPs and bytes of one run of the problem, the same for every
//      version, so GB/s is the *effective* bandwidth llm.c's dev/cuda reports): GB/s and TFLOP/s at the
//      median time; the fraction of the ceiling, which for a GPU is the datasheet peak of its model at the
//      version's precision and its memory bandwidth (common/bench/gpu_peaks.h), and for the CPU the sgemm
//      throughput and the bandwidth of a copy of the kernel's bytes, measured in the same run before each CPU
//      version and after the last, the fastest sample kept (ceilings.h); a fraction above 100% is printed with
//      a `*` and a note (the ceiling was measured lower than the kernel ran); speedups over the previous timed
//      version and the first one, with bench::compare's verdict (a gain only beyond the spread of repeats).
//      Versions are compared only with versions timed the same way: CUDA versions among themselves, CPU
//      versions among themselves (two clocks are not one yardstick, and emulated times are no GPU's).
// A version may be left out at a size where it would take too long (`left_out` says why and what runs it): it
// keeps its number and its line in the report, and is neither validated nor timed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/bench/gpu_peaks.h"
#include "common/bench/result.h"
#include "common/bench/stats.h"
#include "common/core/device.h"
#include "common/lab/ceilings.h"
#include "common/lab/compare.h"

namespace lab::kernel_lab {

// Analytic counts of one run of the problem: FLOPs and bytes that must move between memory and the chip.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

// One output of a version against its reference.
struct Check {
  std::string name;
  Tensor actual;
  Tensor expected;  // the CPU reference (for the low-precision rule: the accurate one)
  Tolerance tol;
  // The low-precision rule (compare_error_to_baseline) replaces `tol` when `baseline` is defined.
  Tensor baseline;
  DType output_dtype = DType::F32;
  double factor = 0;
  double allowance = 0;

  // Every element within `tol` of `expected`.
  static Check close(std::string name, Tensor actual, Tensor expected, Tolerance tol);
  // The error against `exact` within `factor` times the error of `baseline`, a straightforward computation in
  // the same precision as `output_dtype`, plus `allowance` (relative to the output's scale) where the
  // implementation computes a function approximately by design (a library's epilogue).
  static Check low_precision(std::string name, Tensor actual, Tensor baseline, Tensor exact, DType output_dtype,
                             double factor = 4.0, double allowance = 0.0);
};

struct Version {
  std::string name;          // "2-D register blocking": its number is its position, shown as "v3 2-D ..."
  std::string what_changes;  // one line: what changes from the previous version, and why it is faster
  Device device;             // where it runs: CPU versions are timed with the steady clock, CUDA ones with events
  bench::Precision precision = bench::Precision::FP32;  // the math it runs in: which peak it is judged against
  std::function<void()> run;                            // one run on the lab's inputs
  std::function<std::vector<Check>()> validate;         // poisons its outputs, runs once, returns the checks
  // Empty: it runs. Else why it does not at this size, and the flag that runs it anyway. (Initialised, so
  // that a version written as a braced list without it draws no missing-initializer warning.)
  std::string left_out = {};
};

struct CheckOutcome {
  std::string name;
  bool passed = false;
  std::string detail;  // compare.h's description: the first bad elements when it failed
};

struct Validation {
  bool passed = false;
  std::vector<CheckOutcome> checks;
  std::string error;  // the exception that stopped validate(), if one did
  // "ok", or what failed: the failed checks' details, or the error.
  std::string describe() const;
};

struct MeasureOptions {
  int warmup = 3;
  int repeats = 20;
  bool flush_l2 = true;     // CUDA versions: flush the L2 before each timed repeat
  std::vector<int> only;    // version numbers to run (1-based); empty: all
  bool cpu_ceiling = true;  // measure the CPU's sgemm and copy ceilings when a CPU version is timed
};

// Samples of the CPU's ceiling taken before each CPU version's warm-up and after the last CPU version: spread
// over the lab, but never between a version's timed repeats, where they would evict a cache-resident kernel's
// data before its next timed run.
inline constexpr int kCpuCeilingSamplesPerVisit = 3;

// One version's line of the report.
struct VersionReport {
  int number = 0;  // 1-based
  std::string name;
  std::string what_changes;
  Device device;
  bench::Precision precision = bench::Precision::FP32;
  std::string left_out;  // the version's: not validated, not timed (see Version)
  Validation validation;
  bool timed = false;  // false when validation failed or the version was left out
  std::string timing;  // "cuda_events", "steady_clock" or "emulated"
  bench::Summary ms;   // milliseconds per run
  double gb_per_s = 0;
  double tflop_per_s = 0;
  std::optional<Ceiling> ceiling;             // none: unknown GPU, emulated, or not measured
  std::optional<double> flops_fraction;       // TFLOP/s over the ceiling's FLOP/s (when both are known)
  std::optional<double> bandwidth_fraction;   // GB/s over the ceiling's bytes/s
  int previous = 0;                           // the number of the version compared with (0: none)
  std::optional<double> speedup_vs_previous;  // previous median / this median (same timing only)
  bench::Verdict verdict_vs_previous = bench::Verdict::WithinSpread;
  std::optional<double> speedup_vs_first;  // the first version timed this way: its median / this median
};

// Fills previous, speedup_vs_previous, verdict_vs_previous and speedup_vs_first of every timed report from
// the medians: each is compared with the nearest earlier version timed the same way (the same `timing`), and
// with the first one timed that way.
void compare_with_earlier(std::vector<VersionReport>& reports);

// Fills gb_per_s, tflop_per_s and the fractions of the ceiling from `cost` and the median time.
void apply_cost(VersionReport& report, const Cost& cost);

class KernelLab {
 public:
  // `name` names the kernel ("matmul"); `problem` its size in words ("M=N=K=1024, fp32").
  KernelLab(std::string name, std::string problem, Cost cost);

  // Appends a version (Error(InvalidArgument) without a name, a run or a validate function).
  void add(Version version);

  const std::string& name() const { return name_; }
  const std::string& problem() const { return problem_; }
  const Cost& cost() const { return cost_; }
  const std::vector<Version>& versions() const { return versions_; }

  // Validates the versions (all, or `only`), in order; element i describes version only[i] (or i + 1). A
  // version left out is not validated: its element has passed = false and `error` says it was left out.
  std::vector<Validation> validate_all(const std::vector<int>& only = {}) const;
  // Version `number`'s report before anything is validated or measured: its name, device and precision.
  VersionReport report_of(int number) const;
  // Validates, then times each version that passed, and compares them.
  std::vector<VersionReport> measure(const MeasureOptions& options = {}) const;

  // The report as a text table: the versions and what each changes, then one line of numbers each.
  std::string table(const std::vector<VersionReport>& reports) const;
  // One row per version (FAILED ones included, with the failure), their columns described, and a metric
  // "vN_ms" with the repeats' summary of each timed version.
  void add_to(bench::BenchResult& result, const std::vector<VersionReport>& reports) const;

 private:
  std::vector<int> selected(const std::vector<int>& only) const;  // 1-based numbers, checked

  std::string name_;
  std::string problem_;
  Cost cost_;
  std::vector<Version> versions_;
};

// A check's verdict (compare_close, or the low-precision rule when it has a baseline).
CheckOutcome evaluate(const Check& check);

}  // namespace lab::kernel_lab
