// gpt2_step_bench: the time of one GPT-2 training step (forward, backward, gradient norm, AdamW), with
// the yardsticks that say how good that time is.
//
//   CPU:  the GEMM floor, i.e. the time the step's own matrix products take when each is run alone through
//         the same sgemm on the same threads, sampled between the timed steps of the same run (gemm_floor.h).
//         The step cannot beat it; the ratio step / floor is the overhead of everything else (elementwise
//         ops, the optimizer, memory). A warning says when the floor's samples spread too far to trust it.
//   GPU:  tokens/s and MFU against the dense peak of the GPU at the chosen precision (6N + 12LCT FLOPs
//         per token), when the GPU is in the peak table.
// Memory: the allocator's peak (all categories) and the process's peak resident set.
// The step is the trainer's (common/train's TrainStep), with the device synchronised between its phases so
// that forward, backward and the optimizer are timed apart (step_bench.h).
//
// --staircase NAME runs a chapter's staircase instead (common/lab/staircase.h): each rung's step in turn in this one
// process, each compared with the rung before it, then PyTorch's step on the same workload when --python can import
// torch (pytorch_rows.h; by default for ch10, with --pytorch for the others); the command line's model, device, batch,
// sequence length and steps are the workload every rung shares. `ch06`: fp32 -> tf32 (GPU) -> bf16 -> fused kernels ->
// twice the batch (ch06_single_gpu/step_staircase.h). `ch09`: bf16 + fused with materialised attention -> batched ->
// flash attention -> CUDA graphs, tuned flash kernels on a GPU -> the one-pass backward
// (ch09_advanced/step_staircase.h). `ch10`: every rung of the book in one staircase, fp32 -> tf32 -> bf16 -> fused ->
// 16-bit activations -> batched -> flash -> tuned flash kernels -> CUDA graphs -> the largest batch that fits the
// earlier rungs' highest peak -> 4 micro-batches of it accumulated per step (ch10_gpt2/step_staircase.h).
//
//   gpt2_step_bench --model d12 --device cpu --batch 4 --seq 64 --steps 10 --json result.json
//   gpt2_step_bench --staircase ch06 --model small --device cpu --batch 8 --seq 128 --steps 5
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>

#include "ch06_single_gpu/step_staircase.h"
#include "ch09_advanced/attention_choice.h"
#include "ch09_advanced/step_staircase.h"
#include "ch10_gpt2/bench/gemm_floor.h"
#include "ch10_gpt2/bench/pytorch_rows.h"
#include "ch10_gpt2/bench/step_bench.h"
#include "ch10_gpt2/step_staircase.h"
#include "common/bench/gpu_peaks.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/core/parallel.h"
#include "common/core/step_profile.h"
#include "common/ops/cpu/gemm.h"
#include "common/ops/flash_attention.h"
#include "common/train/math_mode.h"
#include "common/util/flags.h"
#include "common/util/main.h"

namespace lab {
namespace {

// Floor samples further apart than this (slowest total over fastest) make the bench warn.
constexpr double kFloorSpreadWarning = 1.25;

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

std::vector<std::string> with_batch(std::vector<std::string> flags, int64_t batch) {
  flags.insert(flags.end(), {"--batch", std::to_string(batch)});
  return flags;
}

// Runs the named staircase, prints its table and writes its rows (one per rung) to `json_path`.
// The rung PyTorch is compared with: the one of the best median tokens/s among those that ran at the staircase's
// batch (not the rungs that search a batch or accumulate, whose steps hold other numbers of tokens).
std::pair<std::string, double> best_same_batch_rung(const staircase::Staircase& stairs,
                                                    const staircase::StaircaseReport& report) {
  std::pair<std::string, double> best{"", 0};
  for (const staircase::RungReport& r : report.rungs) {
    const staircase::Settings settings = staircase::parse_settings(stairs.flags_for(r.rung));
    const staircase::MetricReport* tokens = r.find("tokens_per_s");
    if (!r.ran || !tokens || settings.count("batch-fits") || settings.count("accumulate")) continue;
    if (tokens->summary.median > best.second) best = {r.rung.name, tokens->summary.median};
  }
  return best;
}

// Runs the named staircase, prints its table (and, with `pytorch`, PyTorch's rows beside it) and writes its rows
// (one per rung, then one per PyTorch run) to `json_path`.
int run_staircase_bench(const std::string& name, const StepBenchSettings& base, bool pytorch, const std::string& python,
                        const std::string& json_path, int argc, char** argv) {
  LAB_CHECK(name == "ch06" || name == "ch09" || name == "ch10", InvalidArgument, "unknown staircase '", name,
            "' (known: ch06, ch09, ch10)");
  const Device device = parse_device_or_auto(base.device);
  const std::vector<std::string> workload = {"--model",  base.model,
                                             "--device", device.str(),
                                             "--seq",    std::to_string(base.seq),
                                             "--steps",  std::to_string(base.steps),
                                             "--warmup", std::to_string(base.warmup)};
  const staircase::Staircase stairs =
      name == "ch06"   ? ch06::speed_staircase(workload, base.batch, device.is_cuda())
      : name == "ch09" ? ch09::attention_staircase(with_batch(workload, base.batch), device.is_cuda())
                       : ch10::book_staircase(workload, base.batch, device.is_cuda());
  std::printf("gpt2_step_bench --staircase %s: %s, %s on %s (%s), %d threads\n", name.c_str(),
              stairs.description.c_str(), base.model.c_str(), device.str().c_str(), lab::device_name(device).c_str(),
              num_threads());
  std::optional<int64_t> highest_peak;  // of the rungs so far: what --batch-fits earlier-rungs means
  const staircase::StaircaseReport report = staircase::run_staircase(
      stairs,
      [&](const staircase::Rung& rung) {
        allocator_for(device).reset_peak();
        StepBenchSettings settings = StepBenchSettings::from_flags(stairs.flags_for(rung));
        if (settings.batch_fits == "earlier-rungs") {
          LAB_CHECK(highest_peak, InvalidArgument, "--batch-fits earlier-rungs: no rung below it ran");
          settings.batch_fits = std::to_string(*highest_peak);
        }
        StepBench bench(settings);
        const StepSamples samples = bench.run();
        std::vector<double> ms, tokens_per_s;
        for (double s : samples.step) {
          ms.push_back(s * 1e3);
          tokens_per_s.push_back(static_cast<double>(bench.tokens_per_step()) / s);
        }
        const int64_t peak = memory_stats(device).peak_total;
        highest_peak = std::max(highest_peak.value_or(0), peak);
        if (!settings.batch_fits.empty())
          std::printf("  %s: batch %lld, the largest whose step fits %s bytes\n", rung.name.c_str(),
                      static_cast<long long>(bench.settings().batch), settings.batch_fits.c_str());
        return std::vector<staircase::Measurement>{
            {"step_ms", "ms", bench::Better::Lower, ms},
            {"tokens_per_s", "tokens/s", bench::Better::Higher, tokens_per_s},
            {"mem_peak_bytes", "bytes", bench::Better::Lower, {static_cast<double>(peak)}}};
      },
      [](const staircase::RungReport& rung) {
        std::printf("  %s: %s\n", rung.rung.name.c_str(), rung.ran ? "done" : ("not run: " + rung.error).c_str());
        std::fflush(stdout);
      });
  std::fputs(report.table().c_str(), stdout);
  std::vector<PyTorchRow> pytorch_rows;
  if (pytorch) {
    pytorch_rows =
        run_pytorch_rows({base.model, device, base.batch, base.seq, base.steps, base.warmup, num_threads(), python});
    const auto [ours, ours_tokens_per_s] = best_same_batch_rung(stairs, report);
    std::fputs(pytorch_table(pytorch_rows, ours, ours_tokens_per_s).c_str(), stdout);
  }
  if (!json_path.empty()) {
    bench::BenchResult result = bench::BenchResult::start("gpt2_step_staircase", argc, argv);
    report.add_to(result);
    for (const PyTorchRow& r : pytorch_rows) {
      Json row = Json::object();
      row.set("rung", r.name);
      row.set("status", r.ran ? "ok" : "not run");
      row.set("error", r.ran ? Json() : Json(r.error));
      row.set("step_ms_median", r.ran ? Json(r.ms) : Json());
      row.set("tokens_per_s_median", r.ran ? Json(r.tokens_per_s) : Json());
      row.set("mem_peak_bytes_median", r.peak_bytes ? Json(*r.peak_bytes) : Json());
      result.add_row(row);
    }
    result.write(json_path);
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

// One more step with the step profile open: its op table (and, on CUDA, its kernel table) printed, and a row per op
// and kernel added to `result`.
void add_profile(StepBench& bench, bench::BenchResult& result) {
  StepProfile profile;
  bench.run_one_step();
  profile.close();
  std::printf("profile of one step: %lld op calls\n%s", static_cast<long long>(profile.calls(ProfileKind::Op)),
              profile.table(ProfileKind::Op).c_str());
  if (bench.device().is_cuda())
    std::printf(
        "%lld kernel launches and cuBLAS calls (device time between CUDA events; under the CUDA emulator, the "
        "emulated kernels' host time):\n%s",
        static_cast<long long>(profile.calls(ProfileKind::Kernel)), profile.table(ProfileKind::Kernel).c_str());
  const ZeroFills fills = profile.zero_fills();
  std::printf("%s\n", fills.line().c_str());
  Json fill_row = Json::object();
  fill_row.set("profile", "zero-fills");
  fill_row.set("calls", fills.count);
  fill_row.set("bytes", fills.bytes);
  result.add_row(fill_row);
  for (const ProfileKind kind : {ProfileKind::Op, ProfileKind::Kernel}) {
    double total = 0;
    for (const ProfileRow& r : profile.rows(kind)) total += r.seconds;
    for (const ProfileRow& r : profile.rows(kind)) {
      Json row = Json::object();
      row.set("profile", cat(kind == ProfileKind::Op ? "op " : "kernel ", r.name));
      row.set("calls", r.calls);
      row.set("total_ms", r.seconds * 1e3);
      row.set("share", total > 0 ? r.seconds / total : 0.0);
      result.add_row(row);
    }
  }
  result.describe_column("total_ms", "ms", bench::Better::Lower);
  result.describe_column("calls", "count", bench::Better::Lower);
  result.describe_column("bytes", "bytes", bench::Better::Lower);
}

int run(int argc, char** argv) {
  StepBenchSettings settings;
  std::string json_path, staircase_name;
  int64_t threads = 0, gemm_repeats = 10;
  bool profile = false;
  Flags flags("gpt2_step_bench",
              "Times GPT-2 training steps and compares them with the GEMM floor (CPU) or the "
              "GPU's peak (MFU), or runs a chapter's staircase of such steps.");
  settings.register_flags(flags);
  flags.add_int("threads", &threads, "CPU threads (0: all cores)", 0, 4096);
  flags.add_int("gemm-repeats", &gemm_repeats,
                "samples of the CPU's GEMM floor (one after each timed step, the rest after the last; each shape's "
                "fastest is kept)",
                1, 1000);
  flags.add_string("json", &json_path, "write the result here (bench JSON)");
  flags.add_bool("profile", &profile,
                 "after the timed steps, run one more with every op and kernel counted and timed, and print the "
                 "tables (the JSON gets one row per op and kernel)");
  bool pytorch = true;
  std::string python = "python3";
  flags.add_bool("pytorch", &pytorch,
                 "with --staircase (by default for ch10): then run PyTorch's step on the same workload (tools/compare/"
                 "pytorch_gpt2_step.py: eager, and torch.compile on a GPU) when --python can import torch; "
                 "--no-pytorch: skip it");
  flags.add_string("python", &python, "with --staircase: the Python that has PyTorch");
  flags.add_string("staircase", &staircase_name,
                   "run this chapter's staircase (ch06, ch09, ch10) on the workload of --model, --device, --batch, "
                   "--seq, --steps and --warmup; the rungs set --dtype, --kernels, --attention, --activations and "
                   "--cuda-graphs");
  if (!flags.parse(argc, argv)) return 0;
  if (!json_path.empty()) bench::BenchResult::check_destination(json_path);  // before minutes of steps
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  if (!staircase_name.empty()) {
    for (const char* rung_flag : {"dtype", "kernels", "attention", "recompute", "activations", "cuda-graphs"})
      LAB_CHECK(!flags.was_set(rung_flag), InvalidArgument, "--staircase sets --", rung_flag,
                " on each rung (or keeps the default): leave it out");
    // The book's staircase ends beside PyTorch unless told not to; a chapter's, when asked.
    const bool with_pytorch = flags.was_set("pytorch") ? pytorch : staircase_name == "ch10";
    return run_staircase_bench(staircase_name, settings, with_pytorch, python, json_path, argc, argv);
  }
  LAB_CHECK(!(profile && settings.cuda_graphs), InvalidArgument,
            "--profile with --cuda-graphs: a replayed graph's kernels cannot be timed one by one (profile without "
            "--cuda-graphs)");

  StepBench step_bench(settings);
  const Device device = step_bench.device();
  const std::string& model_name = settings.model;
  const std::string& dtype = settings.dtype;
  // --batch-fits: the batch the search found.
  const int64_t batch = step_bench.settings().batch, seq = settings.seq, tokens = step_bench.tokens_per_step();
  const GPT2& model = step_bench.model();
  std::printf("gpt2_step_bench: %s (%s) on %s (%s), B=%lld%s T=%lld%s, %s, %d threads\n", model_name.c_str(),
              model.config().str().c_str(), device.str().c_str(), lab::device_name(device).c_str(),
              static_cast<long long>(batch),
              settings.batch_fits.empty() ? "" : cat(" (the largest that fits ", settings.batch_fits, ")").c_str(),
              static_cast<long long>(seq),
              settings.accumulate > 1 ? cat(", ", settings.accumulate, " micro-batches per step").c_str() : "",
              settings.model_rungs().str().c_str(), num_threads());
  const std::string note =
      ch09::attention_note(settings.model_rungs().attention, device, matmul_dtype(parse_math_mode(settings.dtype)));
  if (!note.empty()) std::printf("%s\n", note.c_str());

  // On the CPU, the GEMM floor (gemm_floor.h): the step's sgemm shapes, recorded by one more step, timed between
  // the timed steps. The peak resident set is the steps' own, read before the floor's operands exist.
  std::optional<GemmFloor> floor;
  int64_t rss = 0;
  if (!device.is_cuda()) {
    const std::vector<ops::cpu::GemmShape> calls = step_bench.record_gemm_shapes();
    rss = peak_resident_bytes();
    floor.emplace(calls);
  }
  const StepSamples samples = step_bench.run([&](int64_t i, double seconds) {
    std::printf("  step %lld: %.1f ms\n", static_cast<long long>(i + 1), seconds * 1e3);
    std::fflush(stdout);
    if (floor && floor->samples() < gemm_repeats) floor->sample();
  });
  if (!floor) rss = peak_resident_bytes();
  while (floor && floor->samples() < gemm_repeats) floor->sample();
  for (const std::string& line : ops::flash_tile_choices()) std::printf("flash-tuned: %s\n", line.c_str());
  const std::vector<double>&step_s = samples.step, &fwd_s = samples.forward, &bwd_s = samples.backward,
        &opt_s = samples.optimizer;
  const bench::Summary step = bench::summarize(step_s);
  const double tokens_per_s = static_cast<double>(tokens) / step.median;
  const double model_flops = gpt2_flops_per_token(model.config(), seq) * static_cast<double>(tokens);

  bench::BenchResult result = bench::BenchResult::start("gpt2_step", argc, argv);
  auto in_ms = [](const std::vector<double>& seconds) {
    std::vector<double> ms;
    for (double s : seconds) ms.push_back(s * 1e3);
    return ms;
  };
  std::vector<double> step_tokens_per_s;
  for (double s : step_s) step_tokens_per_s.push_back(static_cast<double>(tokens) / s);
  // Under CUDA graphs the step is one launch: its phases have no times of their own.
  const bool phases = !fwd_s.empty();
  result.add_metric("step_ms", in_ms(step_s), "ms", bench::Better::Lower);
  if (phases) {
    result.add_metric("forward_ms", in_ms(fwd_s), "ms", bench::Better::Lower);
    result.add_metric("backward_ms", in_ms(bwd_s), "ms", bench::Better::Lower);
    result.add_metric("optimizer_ms", in_ms(opt_s), "ms", bench::Better::Lower);
  }
  result.add_metric("tokens_per_s", step_tokens_per_s, "tokens/s", bench::Better::Higher);
  // One row, labelled by the model alone: two runs of other batch shapes, devices or precisions pair up in
  // bench_diff, which shows the differing settings beside the ratios.
  Json row = Json::object();
  row.set("model", model_name);
  row.set("device", device.is_cuda() ? "cuda" : "cpu");
  row.set("dtype", dtype);
  row.set("kernels", settings.kernels);
  row.set("attention", settings.attention);
  row.set("recompute", settings.recompute);
  row.set("activations", settings.activations);
  row.set("cuda_graphs", settings.cuda_graphs);
  row.set("batch", batch);
  row.set("accumulate", settings.accumulate);
  row.set("seq", seq);
  row.set("ms_median", step.median * 1e3);
  row.set("ms_min", step.min * 1e3);
  row.set("ms_max", step.max * 1e3);
  if (phases) {
    row.set("forward_ms", bench::median(fwd_s) * 1e3);
    row.set("backward_ms", bench::median(bwd_s) * 1e3);
    row.set("optimizer_ms", bench::median(opt_s) * 1e3);
  }
  row.set("tokens_per_s", tokens_per_s);
  row.set("model_gflops_per_step", model_flops / 1e9);
  for (const char* ms : {"ms_median", "ms_min", "ms_max", "forward_ms", "backward_ms", "optimizer_ms", "gemm_floor_ms"})
    result.describe_column(ms, "ms", bench::Better::Lower);
  result.describe_column("tokens_per_s", "tokens/s", bench::Better::Higher);
  result.describe_column("sgemm_gflops_per_s", "GFLOP/s", bench::Better::Higher);
  result.describe_column("step_over_floor", "ratio", bench::Better::Lower);
  result.describe_column("mfu", "fraction", bench::Better::Higher);
  result.describe_column("mem_peak_bytes", "bytes", bench::Better::Lower);
  result.describe_column("peak_rss_bytes", "bytes", bench::Better::Lower);
  std::printf("step: median %.1f ms (min %.1f, max %.1f)", step.median * 1e3, step.min * 1e3, step.max * 1e3);
  if (phases)
    std::printf(" = forward %.1f + backward %.1f + optimizer %.1f ms\n", bench::median(fwd_s) * 1e3,
                bench::median(bwd_s) * 1e3, bench::median(opt_s) * 1e3);
  else
    std::printf(", one CUDA graph launch each (after an eager step and the capture)\n");
  std::printf("throughput: %.0f tokens/s, %.1f model GFLOP/s\n", tokens_per_s, model_flops / step.median / 1e9);

  std::optional<double> mfu;
  std::string peak_name;
  if (device.is_cuda()) {
    const auto peak = bench::gpu_peak_flops(lab::device_name(device), parse_math_mode(dtype));
    if (peak) {
      mfu = model_flops / step.median / peak->flops;
      peak_name = cat(peak->entry, " ", dtype, " ", peak->flops / 1e12, " TFLOP/s");
      std::printf("MFU: %.1f%% of %s\n", *mfu * 100, peak_name.c_str());
    } else {
      std::printf("MFU: unknown GPU: peak not known\n");
    }
  } else {
    const double floor_s = floor->seconds(), gemm_flops = floor->flops();
    std::printf(
        "GEMM floor (%zu sgemm calls, %zu shapes, %s; each the fastest of %d samples taken between the "
        "steps):\n%s",
        floor->calls(), floor->shapes(), ops::cpu::gemm_uses_blas() ? "OpenBLAS" : "portable loops", floor->samples(),
        floor->table().c_str());
    std::printf("GEMM floor: %.1f ms (%.1f GFLOP at %.1f GFLOP/s); step / floor = %.2f\n", floor_s * 1e3,
                gemm_flops / 1e9, gemm_flops / floor_s / 1e9, step.median / floor_s);
    // A loaded machine makes both numbers uncertain; say so rather than print a ratio that means nothing.
    if (floor->spread() > kFloorSpreadWarning)
      std::printf(
          "warning: the GEMM floor's samples were up to %.2fx apart (the machine's load changed during the "
          "run): step / floor is uncertain; rerun on an idle machine\n",
          floor->spread());
    if (step.median < floor_s)
      std::printf(
          "warning: the step's median is below its GEMM floor: the floor was timed under more load than "
          "the steps, so step / floor means nothing in this run\n");
    row.set("gemm_floor_ms", floor_s * 1e3);
    row.set("gemm_gflops", gemm_flops / 1e9);
    row.set("sgemm_gflops_per_s", gemm_flops / floor_s / 1e9);
    row.set("step_over_floor", step.median / floor_s);
  }
  row.set("mfu", mfu ? Json(*mfu) : Json());
  row.set("peak_name", peak_name.empty() ? Json() : Json(peak_name));
  const MemoryStats mem = memory_stats(device);
  row.set("mem_peak_bytes", mem.peak_total);
  row.set("peak_rss_bytes", rss);
  std::printf(
      "memory: allocator peak %.0f MiB (params %.0f, grads %.0f, optimizer %.0f, activations %.0f); peak "
      "resident set %.0f MiB\n",
      mem.peak_total / 1048576.0, mem.peak_of(MemCategory::Params) / 1048576.0,
      mem.peak_of(MemCategory::Grads) / 1048576.0, mem.peak_of(MemCategory::Optimizer) / 1048576.0,
      mem.peak_of(MemCategory::Activations) / 1048576.0, rss / 1048576.0);
  result.add_row(row);
  if (profile) add_profile(step_bench, result);
  if (!json_path.empty()) {
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
