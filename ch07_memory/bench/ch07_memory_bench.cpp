// ch07_memory_bench: the memory staircases of chapter 7.
//
// In one process, the memory staircase (memory_staircase.h): each rung trains its own GPT-2, built by the trainer's
// builder (ch10_gpt2/run_settings.h), for a few steps on the same tokens; the table gives each rung's peak bytes by
// category as the allocator counted them, its step time, and both as ratios to the rung before. A second table is
// theory only: what each rung would need on an 80 GB GPU at B=16, T=1024 in bf16 with fp32 master weights and moments,
// for every GPT-2 size, and whether it fits; a third, the ZeRO rungs on 8 and 64 such GPUs (zero/zero_theory.h, the
// theory the ZeRO rows below are read against, in fp32 as they train).
//
// Under mpirun with D >= 2 ranks, also the ZeRO staircase (zero_staircase.h): data parallelism and ZeRO stages
// 1 to 3 on the same global batch, each rank training on its own rows; the table gives rank 0's peaks by
// category (every rank's are equal up to the padding of the last shards), the parameters + gradients +
// optimizer state beside their formula (16Ψ, 8Ψ + 8Ψ/D, 4Ψ + 12Ψ/D, 16Ψ/D), the excess over it beside what
// theory holds whole beside the shards, by name (the bucket in flight, the unit gathered, the unit prefetched),
// the largest peak over the ranks and the slowest rank's step time. Every rank also runs the one-process staircase on
// its own copy (so that no rank waits minutes at a collective meanwhile); rank 0 alone prints and writes the JSON.
//
//   ch07_memory_bench --model d12 --batch 4 --seq 64 --json ch07.json
//   mpirun -np 2 ch07_memory_bench --model d12 --batch 4 --seq 64 --threads 1 --json ch07_np2.json
//
// The JSON is a bench result (common/bench/result.h: one row per rung, the ZeRO rungs named "zero:<rung>"),
// read by bench_diff and scripts/plot_bench.py.
#include <algorithm>
#include <cstdio>

#include "ch07_memory/bench/zero_staircase.h"
#include "ch07_memory/memory_staircase.h"
#include "ch07_memory/memory_theory.h"
#include "ch10_gpt2/run_settings.h"
#include "common/bench/result.h"
#include "common/bench/text_table.h"
#include "common/comm/device_communicator.h"
#include "common/comm/world.h"
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

// A rung's median of `metric` in MiB or ms, "-" when it has none.
std::string median_cell(const staircase::RungReport& r, const std::string& metric) {
  const staircase::MetricReport* m = r.find(metric);
  return m ? fixed(m->summary.median, 1) : std::string("-");
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
    t.add({r.rung.name, median_cell(r, "params_MiB"), median_cell(r, "grads_MiB"), median_cell(r, "optimizer_MiB"),
           median_cell(r, "activations_MiB"), median_cell(r, "other_MiB"), median_cell(r, "peak_MiB"),
           ratio_cell(r.find("peak_MiB")), median_cell(r, "step_ms"), ratio_cell(r.find("step_ms"))});
  }
  return t.render("  ");
}

// The ZeRO rungs: rank 0's peaks by category, parameters + gradients + optimizer against the stage's formula, the
// excess over it beside what theory holds whole (zero/zero_theory.h), the largest peak over the ranks, the
// slowest rank's step time.
std::string zero_table(const ch07::ZeroStaircaseReport& zero) {
  constexpr double kMiB = 1024.0 * 1024.0;
  bench::TextTable t;
  t.add({"rung", "params", "grads", "optimizer", "activations", "comm", "p+g+o MiB", "formula", "vs formula", "excess",
         "held whole in theory, MiB", "vs formula+whole", "peak MiB", "max rank peak", "step ms"});
  for (size_t i = 0; i < zero.report.rungs.size(); ++i) {
    const staircase::RungReport& r = zero.report.rungs[i];
    if (!r.ran) {
      t.add({r.rung.name, cat("not run: ", r.error)});
      continue;
    }
    const ch07::ZeroStateTheory& theory = zero.theory[i];
    const double state = r.find("state_MiB")->summary.median, formula = theory.sharded / kMiB;
    t.add({r.rung.name, median_cell(r, "params_MiB"), median_cell(r, "grads_MiB"), median_cell(r, "optimizer_MiB"),
           median_cell(r, "activations_MiB"), median_cell(r, "comm_MiB"), fixed(state, 1), fixed(formula, 1),
           cat(fixed(state / formula, 3), "x"), fixed(state - formula, 1), theory.whole_str(),
           cat(fixed(state / (theory.total() / kMiB), 3), "x"), median_cell(r, "peak_MiB"),
           median_cell(r, "max_rank_peak_MiB"), median_cell(r, "step_ms")});
  }
  return t.render("  ");
}

// Theory for an 80 GB GPU at B=16, T=1024, bf16: each rung's total for every GPT-2 size, with what `attention`
// keeps (the materialised probabilities, or chapter 9's flash attention: one log-sum-exp per head and token), or
// what the rung's own --attention keeps. A rung that sets --attention flash is left out of the flash table: it is
// the row above it there.
std::string gpu_projection_table(const staircase::Staircase& stairs, const ch07::MemoryBenchConfig& config,
                                 ch07::AttentionKept attention) {
  constexpr int64_t kRows = 16, kSeq = 1024;
  constexpr double kGpuBytes = 80e9;
  const std::vector<std::string> models = {"d12", "d24", "d36", "d48"};
  bench::TextTable t;
  std::vector<std::string> header = {"rung", "micro-batch"};
  for (const std::string& m : models) header.push_back(cat(m, " GB"));
  t.add(header);
  for (const staircase::Rung& rung : stairs.rungs) {
    const staircase::Settings s = staircase::parse_settings(stairs.flags_for(rung));
    const bool flash = s.count("attention") && s.at("attention") == "flash";
    if (flash && attention == ch07::AttentionKept::LogSumExp) continue;
    const ch07::AttentionKept kept = flash ? ch07::AttentionKept::LogSumExp : attention;
    const int64_t micro_rows = kRows * std::stoll(s.at("batch")) / config.batch;
    const auto policy = ch07::parse_recompute_policy(s.count("recompute") ? s.at("recompute") : "none");
    const auto head = ch07::parse_lm_head(s.count("lm-head") ? s.at("lm-head") : "full");
    std::vector<std::string> row = {rung.name, cat(micro_rows, " x ", kSeq)};
    for (const std::string& m : models) {
      const GPT2Config model = GPT2Config::from_name(m);
      const ch07::MemoryTheory th = ch07::memory_theory(model, micro_rows, kSeq, policy, 2, kept, 0, 0, head);
      // The optimizer in backward keeps the tied token embedding's gradient (alive through the whole backward)
      // instead of all of them (optimizer_in_backward.h).
      const int64_t grads_kept =
          s.count("optimizer-in-backward") ? model.padded_vocab_for(1) * model.n_embd * 2 : th.of(MemCategory::Grads);
      const double bytes =
          static_cast<double>(th.total() - th.of(MemCategory::Grads) + grads_kept + th.recomputed_block_bytes);
      row.push_back(cat(fixed(bytes / 1e9, 1), bytes <= kGpuBytes ? " fits" : " does not fit"));
    }
    t.add(row);
  }
  return t.render("  ");
}

// Theory for N GPUs of 80 GB under ZeRO, N = 8 and 64: each stage's parameters, gradients and optimizer state
// per rank with what is whole beside the shards (zero/zero_theory.h: the measured ZeRO rows' theory, in fp32 as
// they train, 16 bytes per parameter), plus the activations of one micro-batch of the accumulation rung
// (16 / micro-batches rows of 1024 tokens, fp32, no recompute), for every GPT-2 size.
std::string gpu_zero_table(const ch07::ZeroBenchConfig& config) {
  constexpr int64_t kRows = 16, kSeq = 1024;
  constexpr double kGpuBytes = 80e9;
  struct Stage {
    const char* name;
    int stage;
    bool prefetch;
  };
  const std::vector<Stage> stages = {
      {"dp", 0, false}, {"zero1", 1, false}, {"zero2", 2, false}, {"zero3", 3, false}, {"zero3-prefetch", 3, true}};
  const std::vector<std::string> models = {"d12", "d24", "d36", "d48"};
  const int64_t micro_rows = std::max<int64_t>(1, kRows / config.memory.micro_batches);
  const auto bucket_bytes = static_cast<int64_t>(config.bucket_mb * 1024 * 1024);
  bench::TextTable t;
  std::vector<std::string> header = {"rung", "GPUs", "micro-batch"};
  for (const std::string& m : models) header.push_back(cat(m, " GB"));
  t.add(header);
  for (const int ranks : {8, 64})
    for (const Stage& stage : stages) {
      std::vector<std::string> row = {stage.name, std::to_string(ranks), cat(micro_rows, " x ", kSeq)};
      for (const std::string& m : models) {
        const GPT2Config model = GPT2Config::from_name(m);
        const ch07::MemoryTheory th = ch07::memory_theory(model, micro_rows, kSeq, ch07::RecomputePolicy::None);
        const ch07::ZeroStateTheory state =
            ch07::zero_state_theory(model, th.parameters, {stage.stage, ranks, bucket_bytes, stage.prefetch});
        const double bytes = state.total() + static_cast<double>(th.of(MemCategory::Activations));
        row.push_back(cat(fixed(bytes / 1e9, 1), bytes <= kGpuBytes ? " fits" : " does not fit"));
      }
      t.add(row);
    }
  return t.render("  ");
}

void print_progress(const staircase::RungReport& r) {
  std::printf("  %s: %s\n", r.rung.name.c_str(), r.ran ? "done" : cat("not run: ", r.error).c_str());
  std::fflush(stdout);
}

// The ZeRO rows of the JSON: named "zero:<rung>", with the theory of parameters + gradients + optimizer (the
// stage's formula, and what theory holds whole beside the shards).
void add_zero_rows(const ch07::ZeroStaircaseReport& zero, int ranks, bench::BenchResult& result) {
  staircase::StaircaseReport named = zero.report;
  for (staircase::RungReport& r : named.rungs) r.rung.name = cat("zero:", r.rung.name);
  const size_t first = result.rows.size();
  named.add_to(result);
  for (size_t i = 0; i < named.rungs.size(); ++i) {
    Json& row = result.rows[first + i];
    row.set("ranks", ranks);
    row.set("theory_state_MiB", zero.theory[i].sharded / (1024.0 * 1024.0));
    row.set("theory_whole_MiB", zero.theory[i].whole_bytes() / (1024.0 * 1024.0));
  }
  result.describe_column("theory_state_MiB", "MiB", bench::Better::Lower);
  result.describe_column("theory_whole_MiB", "MiB", bench::Better::Lower);
}

int run(int argc, char** argv) {
  ch07::ZeroBenchConfig zero_config;
  ch07::MemoryBenchConfig& config = zero_config.memory;
  std::string device = "cpu", json_path;
  int64_t threads = 0;
  Flags flags(
      "ch07_memory_bench",
      "Runs the memory staircase (original, gradient accumulation, selective and block recompute, the "
      "optimizer in backward, flash attention, the chunked LM head) in one process: peak bytes by category and step "
      "time of each rung, with "
      "ratios to the rung before. Under mpirun with 2 or more ranks, also the ZeRO staircase (data "
      "parallelism, ZeRO stages 1, 2, 3).");
  flags.add_string("model", &config.model, "model size: d12, d24, d36, d48, small, tiny");
  flags.add_int("batch", &config.batch,
                "rows per optimizer step (the original rung's batch; the ZeRO rungs' global batch)", 1, 1 << 16);
  flags.add_int("seq", &config.seq, "sequence length T", 1, 1 << 16);
  flags.add_int("micro-batches", &config.micro_batches,
                "micro-batches of the accumulation rung and those above (the ZeRO rungs': over all ranks)", 1, 1 << 16);
  flags.add_int("steps", &config.steps, "timed steps per rung (after one untimed step)", 1, 1000);
  flags.add_float("bucket-mb", &zero_config.bucket_mb, "the ZeRO rungs' bucket size in MiB (their shards follow it)",
                  1e-3, 1e6);
  flags.add_string("device", &device, "cpu, cuda, cuda:N (under mpirun, rank r takes the N+r-th GPU)");
  flags.add_int("threads", &threads, "CPU threads per process (0: all cores)", 0, 4096);
  flags.add_string("json", &json_path, "write the result here (bench JSON)");
  if (!flags.parse(argc, argv)) return 0;
  if (!json_path.empty()) bench::BenchResult::check_destination(json_path);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  GPT2Config::from_name(config.model);  // an unknown name fails here, before any rung runs

  comm::World world;
  const int ranks = world.comm().size(), rank = world.comm().rank();
  const bool printer = rank == 0;
  config.device = parse_device(device);
  if (config.device.is_cuda()) config.device = Device::cuda(config.device.index + rank);
  // Checked before anything runs, so that a batch that does not split fails at once on every rank.
  const std::optional<staircase::Staircase> zero_stairs =
      ranks > 1 ? std::optional(ch07::zero_staircase(zero_config, ranks)) : std::nullopt;

  const staircase::Staircase stairs = ch07::memory_staircase(config);
  if (printer) std::printf("ch07_memory_bench: %s, %d CPU threads\n", stairs.description.c_str(), num_threads());
  const staircase::StaircaseReport report = staircase::run_staircase(
      stairs,
      [&](const staircase::Rung& rung) {
        return measure_training_rung(staircase::parse_settings(stairs.flags_for(rung)), config.device, config.steps);
      },
      [&](const staircase::RungReport& r) {
        if (printer) print_progress(r);
      });
  if (printer) {
    std::printf("\nmeasured (allocator peaks over a step, medians of %lld steps):\n%s",
                static_cast<long long>(config.steps), measured_table(report).c_str());
    for (const staircase::Rung& rung : stairs.rungs)
      std::printf("  %s: %s\n", rung.name.c_str(), rung.what_changes.c_str());
    std::printf(
        "\ntheory for an 80 GB GPU, B=16 x T=1024 per step, bf16 weights and activations, fp32 master weights "
        "and AdamW moments (16 bytes per parameter):\n%s",
        gpu_projection_table(stairs, config, ch07::AttentionKept::Probabilities).c_str());
    std::printf(
        "\nthe same with chapter 9's flash attention (--attention flash: a log-sum-exp per head and token kept "
        "instead of the T probabilities):\n%s",
        gpu_projection_table(stairs, config, ch07::AttentionKept::LogSumExp).c_str());
    std::printf(
        "\ntheory for N GPUs of 80 GB under ZeRO, per GPU, in fp32 as the ZeRO rows below train (16 bytes per "
        "parameter): parameters, gradients and optimizer state sharded by the stage, with what is whole beside the "
        "shards (the gradients in flight, the unit gathered and the one prefetched: the measured rows' theory), plus "
        "one micro-batch's activations:\n%s",
        gpu_zero_table(zero_config).c_str());
  }

  std::optional<ch07::ZeroStaircaseReport> zero;
  if (!zero_stairs) {
    std::printf(
        "\nZeRO rungs (dp, zero1, zero2, zero3, zero3-prefetch): not run, they need mpirun -np N with N >= 2\n");
  } else {
    const std::unique_ptr<comm::Communicator> group = comm::communicator_for(world.comm(), config.device);
    if (printer) std::printf("\nch07_memory_bench: %s\n", zero_stairs->description.c_str());
    zero = ch07::run_zero_staircase(*group, zero_config, [&](const staircase::RungReport& r) {
      if (printer) print_progress(r);
    });
    if (printer) {
      std::printf(
          "\nZeRO, %d ranks (rank 0's allocator peaks over a step, medians of %lld steps; p+g+o: parameters + "
          "gradients + optimizer state, against theory with Ψ = %lld parameters; max rank peak: the largest "
          "peak over the ranks; step: the slowest rank's):\n%s",
          ranks, static_cast<long long>(config.steps), static_cast<long long>(zero->parameters),
          zero_table(*zero).c_str());
      for (const staircase::Rung& rung : zero_stairs->rungs)
        std::printf("  %s: %s\n", rung.name.c_str(), rung.what_changes.c_str());
    }
  }
  if (printer && !json_path.empty()) {
    bench::BenchResult result = bench::BenchResult::start("ch07_memory", argc, argv);
    if (ranks > 1) result.command = cat("mpirun -np ", ranks, " ", result.command);  // re-runnable as recorded
    report.add_to(result);
    if (zero) add_zero_rows(*zero, ranks, result);
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
