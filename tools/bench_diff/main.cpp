// bench_diff: prints two bench result files (see common/bench/result.h) side by side, with the ratio B/A
// for every metric and row they share, gains and regressions marked, and the machines when they differ.
// Either file may also be a training log of gpt2_train (--log-json), read as a result by
// common/bench/train_log_result.h: two runs' step times and loss curves side by side.
//
//   bench_diff results/before.json results/after.json
//   bench_diff --a run1.jsonl --b run2.jsonl
#include "common/util/main.h"

#include <cstdio>
#include <string>
#include <vector>

#include "common/bench/diff.h"
#include "common/bench/train_log_result.h"
#include "common/core/error.h"
#include "common/util/flags.h"

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, [](int argc, char** argv) {
    std::string path_a;
    std::string path_b;
    double tolerance = 0.05;
    lab::Flags flags("bench_diff",
                     "Compares two bench result files (or two gpt2_train JSON logs): B/A ratios, gains and "
                     "regressions. The files are given as `bench_diff A B` or with --a and --b.");
    flags.add_string("a", &path_a, "the baseline result file (A)");
    flags.add_string("b", &path_b, "the result file to compare with it (B)");
    flags.add_float("row-tolerance", &tolerance, "relative change of a row value below which it is not marked", 0, 10);
    // Every flag here takes a value, so an argument that is neither a flag nor a flag's value is a file.
    std::vector<std::string> flag_args, files;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("-", 0) != 0) {
        files.push_back(arg);
        continue;
      }
      flag_args.push_back(arg);
      const bool takes_next = arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos && arg != "--help";
      if (takes_next && i + 1 < argc) flag_args.emplace_back(argv[++i]);
    }
    if (!flags.parse(flag_args)) return 0;
    for (const std::string& file : files) {
      std::string& slot = path_a.empty() ? path_a : path_b;
      LAB_CHECK(slot.empty(), InvalidArgument, "too many files: '", file, "' (give two: bench_diff A B)");
      slot = file;
    }
    LAB_CHECK(!path_a.empty() && !path_b.empty(), InvalidArgument,
              "two files are needed: bench_diff A B, or --a A --b B (see --help)");

    lab::bench::DiffOptions options;
    options.source_a = path_a;
    options.source_b = path_b;
    options.row_tolerance = tolerance;
    const std::string report = lab::bench::diff_results(lab::bench::read_result_or_train_log(path_a),
                                                        lab::bench::read_result_or_train_log(path_b), options);
    std::fputs(report.c_str(), stdout);
    return 0;
  });
}
