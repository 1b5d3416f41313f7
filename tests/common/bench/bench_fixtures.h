// Two small bench results on one machine, for the bench_diff and plot tests: B is faster in step_ms
// (beyond the spread), level in tokens_per_s (within the spread), and each has a metric and a row the
// other lacks.
#pragma once

#include <vector>

#include "common/bench/result.h"

namespace lab::bench::testing {

inline MachineInfo fixture_machine() {
  MachineInfo m;
  m.hostname = "node1";
  m.os = "Linux 6.1 x86_64";
  m.cpu_model = "Test CPU";
  m.cpu_cores = 8;
  m.threads = 8;
  m.memory_bytes = int64_t{16} << 30;
  m.compiler = "GCC 12";
  m.build_type = "optimized";
  return m;
}

inline Json stage_row(const char* stage, double ms, double gflops) {
  return Json(Json::Object{{"stage", stage}, {"ms", ms}, {"gflops", gflops}});
}

inline BenchResult fixture_a() {
  BenchResult r;
  r.bench = "matmul";
  r.machine = fixture_machine();
  r.command = "./bin/matmul_bench --version 1";
  r.date = "2025-01-30T08:00:00Z";
  r.add_metric("step_ms", std::vector<double>{10, 11, 12}, "ms", Better::Lower);
  r.add_metric("tokens_per_s", std::vector<double>{1000, 1010, 1020}, "tokens/s", Better::Higher);
  r.add_metric("load_ms", std::vector<double>{3}, "ms", Better::Lower);
  r.describe_column("ms", "ms", Better::Lower);
  r.add_row(stage_row("v1 naive", 40, 50));
  r.add_row(stage_row("v2 tiled", 20, 100));
  r.add_row(stage_row("v3 only in A", 15, 130));
  return r;
}

inline BenchResult fixture_b() {
  BenchResult r;
  r.bench = "matmul";
  r.machine = fixture_machine();
  r.command = "./bin/matmul_bench --version 2";
  r.date = "2025-01-31T08:00:00Z";
  r.add_metric("step_ms", std::vector<double>{7, 7.5, 8}, "ms", Better::Lower);
  r.add_metric("tokens_per_s", std::vector<double>{1000, 1005, 1015}, "tokens/s", Better::Higher);
  r.add_metric("mem_gb", std::vector<double>{2}, "GB", Better::Lower);
  r.describe_column("ms", "ms", Better::Lower);
  r.add_row(stage_row("v1 naive", 40.4, 49.5));
  r.add_row(stage_row("v2 tiled", 10, 200));
  r.add_row(stage_row("v4 only in B", 9, 220));
  return r;
}

}  // namespace lab::bench::testing
