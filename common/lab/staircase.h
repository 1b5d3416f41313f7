// A staircase: the stages of an optimization as data, each rung one setting away from the rung below it,
// run one after another in one process and each compared with the rung before it and with the first.
//
//     Staircase speed{"speed", "GPT-2 d12 step, B=16 T=1024", {"--model", "d12", "--batch", "16", "--seq", "1024"},
//                     {{"fp32", "the baseline", {}},
//                      {"tf32", "TF32 tensor cores for the GEMMs", {"--dtype", "tf32"}},
//                      {"bf16", "bf16 autocast, fp32 master weights", {"--dtype", "bf16"}}}};
//     const StaircaseReport report = run_staircase(speed, [&](const Rung& rung) {
//       TrainOptions options = parse(speed.flags_for(rung));    // the caller knows what the flags mean
//       return std::vector<Measurement>{{"step_ms", "ms", bench::Better::Lower, time_steps(options)}};
//     });
//     std::fputs(report.table().c_str(), stdout);
//
// Flags are in the trainer's form (`--name value`, `--name=value`, a boolean as `--name` or `--no-name`) and a
// rung's flags are applied on top of the staircase's base flags. Rungs are cumulative: each rung lists every
// setting it keeps from the rungs below plus the one it adds or changes, so that any rung can be run alone
// with exactly the flags it shows. check_one_change_per_rung() holds every staircase to that: from one rung
// to the next exactly one setting is added or changed and none is dropped; so a ratio between two
// neighbours measures one change.
//
// Each rung's measurements are repeats (samples); a rung is compared with the nearest earlier rung that has
// the same measurement, and with the first, through bench::compare: the ratio after/before of the medians,
// and a gain or a regression only when the medians differ by more than the spread of the repeats. A rung whose
// function throws (a setting this machine cannot run, such as tf32 without a GPU) is reported as not run, with
// the reason, and the rungs above it are compared with the last rung that ran.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/bench/result.h"
#include "common/bench/stats.h"

namespace lab::staircase {

struct Rung {
  std::string name;                // short, unique in its staircase: "tf32"
  std::string what_changes;        // one line: what this rung changes from the one below, and why it helps
  std::vector<std::string> flags;  // on top of the staircase's base flags
};

struct Staircase {
  std::string name;                     // "speed", "memory"
  std::string description;              // the workload the rungs share, in words
  std::vector<std::string> base_flags;  // the base configuration every rung starts from
  std::vector<Rung> rungs;

  // The base flags followed by the rung's (so the rung's win where both set a flag).
  std::vector<std::string> flags_for(const Rung& rung) const;
};

// A flag list as settings: "--batch 8 --shuffle --no-bias --lr=3e-4" -> {batch: "8", shuffle: "true",
// bias: "false", lr: "3e-4"}. A later flag overrides an earlier one. Error(InvalidArgument) for a token that
// is not a flag where a flag is expected ("8" with no flag before it).
using Settings = std::map<std::string, std::string>;
Settings parse_settings(const std::vector<std::string>& flags);

// What changed from `before` to `after`, as flags: "--dtype fp32 -> tf32", "+ --recompute block",
// "- --shuffle true"; several changes are joined by "; ".
std::string describe_change(const Settings& before, const Settings& after);

// The staircase's problems, one line each (empty when it is well formed): rungs without a name or with the
// same name, a flag given twice within one rung, flags that do not parse, and, from each rung to the next,
// anything but exactly one setting added or changed with none dropped.
std::vector<std::string> check_one_change_per_rung(const Staircase& staircase);

// A staircase written as the setting each rung changes: each rung keeps the settings of the rungs below it and
// adds (or replaces) one flag. `value` empty: a boolean flag, given bare ("--cuda-graphs"). A change marked gpu_only
// is left out when `on_gpu` is false (the CPU has no TF32, no CUDA graphs), and the rung above it then follows the
// one below directly.
struct Change {
  std::string name;
  std::string what_changes;
  std::string flag;
  std::string value;
  bool gpu_only = false;
};
Staircase cumulative_staircase(std::string name, std::string description, std::vector<std::string> base_flags,
                               const std::vector<Change>& changes, bool on_gpu);

// One measurement of a rung: its repeats.
struct Measurement {
  std::string name;  // "step_ms", "tokens_per_s", "peak_bytes"
  std::string unit;
  bench::Better better = bench::Better::Lower;
  std::vector<double> samples;
};

struct MetricReport {
  std::string name;
  std::string unit;
  bench::Better better = bench::Better::Lower;
  bench::Summary summary;
  int previous = -1;                             // index of the rung compared with (-1: none)
  std::optional<bench::Comparison> vs_previous;  // ratio this / previous rung's median, and the verdict
  std::optional<bench::Comparison> vs_first;     // ratio this / the first rung that has this measurement
};

struct RungReport {
  Rung rung;
  std::string change;  // describe_change() from the rung below ("(base)" for the first)
  bool ran = false;
  std::string error;  // why it did not run
  std::vector<MetricReport> metrics;

  const MetricReport* find(const std::string& metric) const;
};

struct StaircaseReport {
  std::string name;
  std::string description;
  std::vector<RungReport> rungs;

  // The rungs and what each changes, then one line per rung and measurement: median [min, max], the ratio to
  // the previous rung with its verdict, and the ratio to the first.
  std::string table() const;
  // One row per rung (label: the rung's name), with "<measurement>_median/_min/_max/_vs_previous/
  // _verdict_vs_previous/_vs_first" columns, and a metric "<rung>.<measurement>" per measurement.
  void add_to(bench::BenchResult& result) const;
};

// Measures one rung: runs the staircase's workload with staircase.flags_for(rung) and returns its
// measurements. An exception means the rung cannot run here.
using RunRung = std::function<std::vector<Measurement>(const Rung& rung)>;

// Checks the staircase (Error(InvalidArgument) listing every problem of check_one_change_per_rung), runs each
// rung in order through `run`, calling `on_rung` after each (to print progress), and compares them.
StaircaseReport run_staircase(const Staircase& staircase, const RunRung& run,
                              const std::function<void(const RungReport&)>& on_rung = {});

// Fills `previous`, `vs_previous` and `vs_first` of every measurement of the rungs that ran.
void compare_rungs(std::vector<RungReport>& rungs);

}  // namespace lab::staircase
