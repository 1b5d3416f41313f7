// Side-by-side comparison of two bench results (the engine of the bench_diff tool).
//
// For every metric present in both results it prints both summaries and the ratio B/A of the medians, and
// marks a gain or a regression only where the medians differ by more than the spread (see stats.h). Rows
// are matched by their label (the first member); for each numeric column present in both it prints the
// ratio B/A. Rows carry no spread, so a row value is marked only when its column's direction is known
// (BenchResult::columns) and the change exceeds a relative tolerance. When the two machines differ, the
// differing fields are listed first: a ratio across machines measures the machines as much as the code.
#pragma once

#include <string>

#include "common/bench/result.h"

namespace lab::bench {

struct DiffOptions {
  std::string source_a = "A";  // where the two results came from (their file names), for the header
  std::string source_b = "B";
  double row_tolerance = 0.05;  // relative change of a row value below which it is not marked
};

std::string diff_results(const BenchResult& a, const BenchResult& b, const DiffOptions& options = {});

}  // namespace lab::bench
