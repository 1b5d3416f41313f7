// bench_diff: prints two bench result files (see common/bench/result.h) side by side, with the ratio B/A
// for every metric and row they share, gains and regressions marked, and the machines when they differ.
//
//   bench_diff --a results/before.json --b results/after.json
#include "common/util/main.h"

#include <cstdio>
#include <string>

#include "common/bench/diff.h"
#include "common/core/error.h"
#include "common/util/flags.h"

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, [](int argc, char** argv) {
    std::string path_a;
    std::string path_b;
    double tolerance = 0.05;
    lab::Flags flags("bench_diff", "Compares two bench result files: B/A ratios, gains and regressions.");
    flags.add_string("a", &path_a, "the baseline result file (A)");
    flags.add_string("b", &path_b, "the result file to compare with it (B)");
    flags.add_float("row-tolerance", &tolerance, "relative change of a row value below which it is not marked", 0, 10);
    if (!flags.parse(argc, argv)) return 0;
    LAB_CHECK(!path_a.empty() && !path_b.empty(), InvalidArgument, "both --a and --b are required (see --help)");

    lab::bench::DiffOptions options;
    options.source_a = path_a;
    options.source_b = path_b;
    options.row_tolerance = tolerance;
    const std::string report =
        lab::bench::diff_results(lab::bench::BenchResult::read(path_a), lab::bench::BenchResult::read(path_b), options);
    std::fputs(report.c_str(), stdout);
    return 0;
  });
}
