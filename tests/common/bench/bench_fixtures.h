// Two small bench results on one machine, for the bench_diff and plot tests: B is faster in step_ms
// (beyond the spread), level in tokens_per_s (within the spread), and each has a metric and a row the
// other lacks.
#pragma once

#include <cstddef>
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

// A gpt2_train JSON log (ch10_gpt2/train_log.h) of `step_ms.size()` steps: a header, the steps with these
// times and losses, and an evaluation at step 0, at every `eval_every` steps and at the end.
inline std::string train_log_text(const std::vector<double>& step_ms, const std::vector<double>& losses,
                                  int64_t eval_every, double val_offset, const std::string& command) {
  std::string text = Json(Json::Object{{"log", "gpt2_train"},
                                       {"date", "2025-01-31T08:00:00Z"},
                                       {"command", command},
                                       {"machine", fixture_machine().to_json()}})
                         .dump() +
                     "\n";
  auto eval = [&](int64_t step, double loss) {
    text += Json(Json::Object{{"step", step}, {"val_loss", loss + val_offset}, {"ms", 30.0}}).dump() + "\n";
  };
  eval(0, 10.8);
  const int64_t n = static_cast<int64_t>(step_ms.size());
  for (int64_t i = 0; i < n; ++i) {
    text += Json(Json::Object{{"step", i + 1},
                              {"loss", losses[static_cast<size_t>(i)]},
                              {"lr", 1e-3},
                              {"grad_norm", 1.0},
                              {"ms", step_ms[static_cast<size_t>(i)]},
                              {"data_ms", 0.5},
                              {"tokens_per_s", 1024 / step_ms[static_cast<size_t>(i)] * 1e3},
                              {"mfu", Json()},
                              {"mem_peak_bytes", 1 << 20}})
                .dump() +
            "\n";
    if ((i + 1) % eval_every == 0 || i + 1 == n) eval(i + 1, losses[static_cast<size_t>(i)]);
  }
  return text;
}

// Run A: 4 steps of about 105 ms. Run B: twice as fast (beyond the spread), and 10% lower losses at the end.
inline std::string train_log_a() {
  return train_log_text({100, 110, 105, 108}, {10.5, 9.0, 8.0, 7.0}, 2, 0.1, "gpt2_train --log-json a.jsonl");
}
inline std::string train_log_b() {
  return train_log_text({50, 52, 51, 53}, {10.5, 8.8, 7.5, 6.3}, 2, 0.1, "gpt2_train --log-json b.jsonl --lr 2e-3");
}

}  // namespace lab::bench::testing
