// A benchmark's result as a JSON file, the input of bench_diff and scripts/plot_bench.py:
//
//   {"bench": "matmul",
//    "machine": {...},                                   see machine.h
//    "command": "./bin/matmul_bench --n 1024",           the exact command, re-runnable from a shell
//    "date": "2025-01-31T12:00:00Z",                     UTC, ISO 8601
//    "metrics": {"step_ms": {"median": 12.3, "min": 12.1, "max": 12.9, "unit": "ms", "better": "lower",
//                            "count": 10, "mean": 12.4, "stddev": 0.2}},
//    "columns": {"ms": {"unit": "ms", "better": "lower"}},
//    "rows": [{"stage": "v1 naive", "ms": 41.0, "gflops": 52.1}, {"stage": "v2 tiled", ...}]}
//
// Metrics are the headline numbers, each a summary of repeats ("median", "min", "max" and "unit" are
// required; "better" defaults to "lower"; "count", "mean" and "stddev" are optional). Rows are a table (one row per
// stage or per configuration); each row is a flat object whose first member is its label, by which bench_diff matches
// the rows of two files. "columns" optionally says which direction is better for a row column, so that differences in
// it can be marked as improvements or regressions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/bench/machine.h"
#include "common/bench/stats.h"
#include "common/util/json.h"

namespace lab::bench {

struct BenchMetric {
  std::string name;
  Summary summary;
  std::string unit;
  Better better = Better::Lower;
};

struct BenchColumn {
  std::string name;
  std::string unit;
  Better better = Better::Lower;
};

struct BenchResult {
  std::string bench;
  MachineInfo machine;
  std::string command;
  std::string date;
  std::vector<BenchMetric> metrics;
  std::vector<BenchColumn> columns;
  std::vector<Json> rows;

  // A result for this run: the machine described now, the command from argv, the date now.
  static BenchResult start(std::string bench, int argc, char** argv);

  // Adds (or replaces) a metric.
  void add_metric(const std::string& name, const Summary& summary, const std::string& unit, Better better);
  void add_metric(const std::string& name, std::span<const double> samples, const std::string& unit, Better better) {
    add_metric(name, summarize(samples), unit, better);
  }
  // Adds (or replaces) the description of a row column.
  void describe_column(const std::string& name, const std::string& unit, Better better);
  // Appends a row: a non-empty object of numbers, strings, booleans or nulls (no nesting).
  void add_row(Json row);

  const BenchMetric* find_metric(const std::string& name) const;
  const BenchColumn* find_column(const std::string& name) const;

  Json to_json() const;
  // Error(Format) naming the key that is missing or wrong.
  static BenchResult from_json(const Json& json);
  // Writes pretty-printed JSON atomically.
  void write(const std::string& path) const;
  // Before any work: checks that a result can be written to `path` (check_file_writable) and that whatever is
  // there is an earlier bench result, never a user's other file. Error(Io) naming the path otherwise.
  static void check_destination(const std::string& path);
  // Error(Io) when the file cannot be read, Error(Format) naming the file and the key when it is wrong.
  static BenchResult read(const std::string& path);
};

// The current time in UTC as ISO 8601: "2025-01-31T12:00:00Z".
std::string iso8601_utc_now();
// argv joined by spaces, each argument quoted for a POSIX shell when it needs it.
std::string command_line(int argc, char** argv);

}  // namespace lab::bench
