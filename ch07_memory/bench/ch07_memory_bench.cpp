// ch07_memory_bench: the memory staircase of chapter 7 in one process. Each rung (memory_staircase.h) trains
// its own GPT-2 for a few steps on the same tokens; the table gives each rung's peak bytes by category as the
// allocator counted them, its step time, and both as ratios to the rung before. A second table is theory only:
// what each rung would need on an 80 GB GPU at B=16, T=1024 in bf16 with fp32 master weights and moments, for
// every GPT-2 size, and whether it fits.
//
//   ch07_memory_bench --model d12 --batch 4 --seq 64 --json ch07.json
//
// The JSON is a bench result (common/bench/result.h: one row per rung), read by bench_diff and
// scripts/plot_bench.py.
#include <cstdio>

#include "ch07_memory/memory_staircase.h"
#include "ch07_memory/memory_theory.h"
#include "common/bench/result.h"
#include "common/bench/text_table.h"
#include "common/core/parallel.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace lab {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string ratio_cell(const staircase::MetricReport* m) {
  return m && m->vs_previous ? cat(fixed(m->vs_previous->ratio, 2), "x") : "-";
}

// Rung | change | peak MiB per category | peak MiB | vs previous | step ms | vs previous.
std::string measured_table(const staircase::StaircaseReport& report) {
  bench::TextTable t;
  t.add({"rung", "params", "grads", "optimizer", "activations", "other", "peak MiB", "vs prev", "step ms", "vs prev"});
  for (const staircase::RungReport& r : report.rungs) {
    if (!r.ran) {
      t.add({r.rung.name, cat("not run: ", r.error)});
      continue;
    }
    auto median = [&](const char* metric) {
      const staircase::MetricReport* m = r.find(metric);
      return m ? fixed(m->summary.median, 1) : std::string("-");
    };
    t.add({r.rung.name, median("params_MiB"), median("grads_MiB"), median("optimizer_MiB"), median("activations_MiB"),
           median("other_MiB"), median("peak_MiB"), ratio_cell(r.find("peak_MiB")), median("step_ms"),
           ratio_cell(r.find("step_ms"))});
  }
  return t.render("  ");
}

// Theory for an 80 GB GPU at B=16, T=1024, bf16: each rung's total for every GPT-2 size.
std::string gpu_projection_table(const staircase::Staircase& stairs, const ch07::MemoryBenchConfig& config) {
  constexpr int64_t kRows = 16, kSeq = 1024;
  constexpr double kGpuBytes = 80e9;
  const std::vector<std::string> models = {"d12", "d24", "d36", "d48"};
  bench::TextTable t;
  std::vector<std::string> header = {"rung", "micro-batch"};
  for (const std::string& m : models) header.push_back(cat(m, " GB"));
  t.add(header);
  for (const staircase::Rung& rung : stairs.rungs) {
    const staircase::Settings s = staircase::parse_settings(stairs.flags_for(rung));
    const int64_t micro_rows = kRows * std::stoll(s.at("batch")) / config.batch;
    const auto policy = ch07::parse_recompute_policy(s.count("recompute") ? s.at("recompute") : "none");
    std::vector<std::string> row = {rung.name, cat(micro_rows, " x ", kSeq)};
    for (const std::string& m : models) {
      const ch07::MemoryTheory th = ch07::memory_theory(GPT2Config::from_name(m), micro_rows, kSeq, policy, 2);
      const double bytes = static_cast<double>(th.total() + th.recomputed_block_bytes);
      row.push_back(cat(fixed(bytes / 1e9, 1), bytes <= kGpuBytes ? " fits" : " does not fit"));
    }
    t.add(row);
  }
  return t.render("  ");
}

int run(int argc, char** argv) {
  ch07::MemoryBenchConfig config;
  std::string device = "cpu", json_path;
  int64_t threads = 0;
  Flags flags("ch07_memory_bench",
              "Runs the memory staircase (original, gradient accumulation, selective and block recompute) in one "
              "process: peak bytes by category and step time of each rung, with ratios to the rung before.");
  flags.add_string("model", &config.model, "model size: d12, d24, d36, d48, small, tiny");
  flags.add_int("batch", &config.batch, "rows per optimizer step (the original rung's batch)", 1, 1 << 16);
  flags.add_int("seq", &config.seq, "sequence length T", 1, 1 << 16);
  flags.add_int("micro-batches", &config.micro_batches, "micro-batches of the accumulation rung and those above", 1,
                1 << 16);
  flags.add_int("steps", &config.steps, "timed steps per rung (after one untimed step)", 1, 1000);
  flags.add_string("device", &device, "cpu, cuda, cuda:N");
  flags.add_int("threads", &threads, "CPU threads (0: all cores)", 0, 4096);
  flags.add_string("json", &json_path, "write the result here (bench JSON)");
  if (!flags.parse(argc, argv)) return 0;
  if (!json_path.empty()) bench::BenchResult::check_destination(json_path);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  config.device = parse_device(device);
  GPT2Config::from_name(config.model);  // an unknown name fails here, before any rung runs

  const staircase::Staircase stairs = ch07::memory_staircase(config);
  std::printf("ch07_memory_bench: %s, %d CPU threads\n", stairs.description.c_str(), num_threads());
  const staircase::StaircaseReport report = staircase::run_staircase(
      stairs,
      [&](const staircase::Rung& rung) {
        return ch07::measure_rung(staircase::parse_settings(stairs.flags_for(rung)), config);
      },
      [](const staircase::RungReport& r) {
        std::printf("  %s: %s\n", r.rung.name.c_str(), r.ran ? "done" : cat("not run: ", r.error).c_str());
        std::fflush(stdout);
      });
  std::printf("\nmeasured (allocator peaks over a step, medians of %lld steps):\n%s",
              static_cast<long long>(config.steps), measured_table(report).c_str());
  for (const staircase::Rung& rung : stairs.rungs)
    std::printf("  %s: %s\n", rung.name.c_str(), rung.what_changes.c_str());
  std::printf(
      "\ntheory for an 80 GB GPU, B=16 x T=1024 per step, bf16 weights and activations, fp32 master weights "
      "and AdamW moments (16 bytes per parameter):\n%s",
      gpu_projection_table(stairs, config).c_str());
  if (!json_path.empty()) {
    bench::BenchResult result = bench::BenchResult::start("ch07_memory", argc, argv);
    report.add_to(result);
    result.write(json_path);
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace lab

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, lab::run);
}
