// gpt2_step_bench: the time of one GPT-2 training step (forward, backward, gradient norm, AdamW), with
// the yardsticks that say how good that time is.
//
//   CPU:  the GEMM floor, i.e. the time the step's own matrix products take when each is run alone through
//         the same sgemm on the same threads, measured in the same run. The step cannot beat it; the
//         ratio step / floor is the overhead of everything else (elementwise ops, the optimizer, memory).
//   GPU:  tokens/s and MFU against the dense peak of the GPU at the chosen precision (6N + 12LCT FLOPs
//         per token), when the GPU is in the peak table.
// Memory: the allocator's peak (all categories) and the process's peak resident set.
// The step is the trainer's (common/train's TrainStep), with the device synchronised between its phases so
// that forward, backward and the optimizer are timed apart.
//
//   gpt2_step_bench --model d12 --device cpu --batch 4 --seq 64 --steps 10 --json result.json
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "common/bench/gpu_peaks.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/core/parallel.h"
#include "common/nn/gpt2.h"
#include "common/ops/cpu/gemm.h"
#include "common/optim/adamw.h"
#include "common/train/math_mode.h"
#include "common/train/train_step.h"
#include "common/util/flags.h"
#include "common/util/main.h"
#include "common/util/rng.h"

namespace lab {
namespace {

// Median seconds of one sgemm of this shape on fresh random operands.
double time_gemm(const ops::cpu::GemmShape& s, int repeats) {
  Rng rng(s.M * 31 + s.N * 17 + s.K);
  std::vector<float> a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.K * s.N)),
      c(static_cast<size_t>(s.M * s.N));
  for (float& x : a) x = rng.normal();
  for (float& x : b) x = rng.normal();
  for (float& x : c) x = rng.normal();
  const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
  const std::vector<double> secs = bench::measure(
      [&] {
        ops::cpu::sgemm(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb,
                        s.accumulate ? 1.0f : 0.0f, c.data(), s.N);
      },
      1, repeats);
  return bench::median(secs);
}

int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

int run(int argc, char** argv) {
  std::string model_name = "d12", device_name_flag = "auto", dtype = "fp32", json_path;
  int64_t batch = 4, seq = 64, steps = 10, warmup = 2, threads = 0, gemm_repeats = 10;
  Flags flags("gpt2_step_bench",
              "Times GPT-2 training steps and compares them with the GEMM floor (CPU) or the "
              "GPU's peak (MFU).");
  flags.add_string("model", &model_name, "model size: d12, d24, d36, d48, small, tiny");
  flags.add_string("device", &device_name_flag, "cpu, cuda, cuda:N or auto");
  flags.add_choice("dtype", &dtype, {"fp32", "tf32"}, "math precision");
  flags.add_int("batch", &batch, "batch size B", 1, 1 << 16);
  flags.add_int("seq", &seq, "sequence length T", 1, 1 << 16);
  flags.add_int("steps", &steps, "timed steps", 1, 100000);
  flags.add_int("warmup", &warmup, "untimed steps first", 0, 1000);
  flags.add_int("threads", &threads, "CPU threads (0: all cores)", 0, 4096);
  flags.add_int("gemm-repeats", &gemm_repeats, "repeats per GEMM shape for the floor", 1, 1000);
  flags.add_string("json", &json_path, "write the result here (bench JSON)");
  if (!flags.parse(argc, argv)) return 0;
  if (!json_path.empty()) bench::BenchResult::check_destination(json_path);  // before minutes of steps
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  const Device device = device_name_flag == "auto" ? best_device() : parse_device(device_name_flag);
  const MathMode math_mode = parse_math_mode(dtype);
  LAB_CHECK(device.is_cuda() || math_mode == MathMode::FP32, InvalidArgument, "--dtype tf32 needs a GPU");
  apply_math_mode(device, math_mode);

  GPT2 model(GPT2Config::from_name(model_name), device);
  model.init_weights(1);
  AdamW opt(model.parameters(), {});
  Rng rng(2);
  std::vector<int32_t> tok(static_cast<size_t>(batch * seq)), tgt(tok.size());
  for (auto& x : tok) x = static_cast<int32_t>(rng.below(50257));
  for (auto& x : tgt) x = static_cast<int32_t>(rng.below(50257));
  const Tensor tokens = Tensor::from_ints(tok, {batch, seq}, device);
  const Tensor targets = Tensor::from_ints(tgt, {batch, seq}, device);
  std::printf("gpt2_step_bench: %s (%s) on %s (%s), B=%lld T=%lld, %d threads\n", model_name.c_str(),
              model.config().str().c_str(), device.str().c_str(), lab::device_name(device).c_str(),
              static_cast<long long>(batch), static_cast<long long>(seq), num_threads());

  // The step the trainer runs, with the device synchronised between its phases to time each one.
  TrainStep train_step(model, opt, TrainStepConfig{1, 1.0, true});
  const BatchSource same_batch = [&] { return MicroBatch{tokens, targets}; };
  constexpr double kLr = 1e-4;
  for (int64_t i = 0; i < warmup; ++i) train_step.run(same_batch, kLr);
  std::vector<double> step_s, fwd_s, bwd_s, opt_s;
  for (int64_t i = 0; i < steps; ++i) {
    const TrainStepResult p = train_step.run(same_batch, kLr);
    fwd_s.push_back(p.forward_seconds);
    bwd_s.push_back(p.backward_seconds);
    opt_s.push_back(p.optimizer_seconds);
    step_s.push_back(p.forward_seconds + p.backward_seconds + p.optimizer_seconds);
    std::printf("  step %lld: %.1f ms\n", static_cast<long long>(i + 1), step_s.back() * 1e3);
    std::fflush(stdout);
  }
  // Peak resident memory of the training steps themselves, before the floor measurement adds its matrices.
  const int64_t rss = peak_resident_bytes();
  const bench::Summary step = bench::summarize(step_s);
  const double tokens_per_s = static_cast<double>(batch * seq) / step.median;
  const double model_flops = gpt2_flops_per_token(model.config(), seq) * static_cast<double>(batch * seq);

  bench::BenchResult result = bench::BenchResult::start("gpt2_step", argc, argv);
  auto in_ms = [](const std::vector<double>& seconds) {
    std::vector<double> ms;
    for (double s : seconds) ms.push_back(s * 1e3);
    return ms;
  };
  std::vector<double> step_tokens_per_s;
  for (double s : step_s) step_tokens_per_s.push_back(static_cast<double>(batch * seq) / s);
  result.add_metric("step_ms", in_ms(step_s), "ms", bench::Better::Lower);
  result.add_metric("forward_ms", in_ms(fwd_s), "ms", bench::Better::Lower);
  result.add_metric("backward_ms", in_ms(bwd_s), "ms", bench::Better::Lower);
  result.add_metric("optimizer_ms", in_ms(opt_s), "ms", bench::Better::Lower);
  result.add_metric("tokens_per_s", step_tokens_per_s, "tokens/s", bench::Better::Higher);
  // One row, labelled by the model alone: two runs of other batch shapes, devices or precisions pair up in
  // bench_diff, which shows the differing settings beside the ratios.
  Json row = Json::object();
  row.set("model", model_name);
  row.set("device", device.is_cuda() ? "cuda" : "cpu");
  row.set("dtype", dtype);
  row.set("batch", batch);
  row.set("seq", seq);
  row.set("ms_median", step.median * 1e3);
  row.set("ms_min", step.min * 1e3);
  row.set("ms_max", step.max * 1e3);
  row.set("forward_ms", bench::median(fwd_s) * 1e3);
  row.set("backward_ms", bench::median(bwd_s) * 1e3);
  row.set("optimizer_ms", bench::median(opt_s) * 1e3);
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
  std::printf("step: median %.1f ms (min %.1f, max %.1f) = forward %.1f + backward %.1f + optimizer %.1f ms\n",
              step.median * 1e3, step.min * 1e3, step.max * 1e3, bench::median(fwd_s) * 1e3, bench::median(bwd_s) * 1e3,
              bench::median(opt_s) * 1e3);
  std::printf("throughput: %.0f tokens/s, %.1f model GFLOP/s\n", tokens_per_s, model_flops / step.median / 1e9);

  std::optional<double> mfu;
  std::string peak_name;
  if (device.is_cuda()) {
    const auto peak = bench::gpu_peak_flops(lab::device_name(device),
                                            dtype == "tf32" ? bench::Precision::TF32 : bench::Precision::FP32);
    if (peak) {
      mfu = model_flops / step.median / peak->flops;
      peak_name = cat(peak->entry, " ", dtype, " ", peak->flops / 1e12, " TFLOP/s");
      std::printf("MFU: %.1f%% of %s\n", *mfu * 100, peak_name.c_str());
    } else {
      std::printf("MFU: unknown GPU: peak not known\n");
    }
  } else {
    // The GEMM floor: record the step's sgemm shapes, then time each one alone.
    std::vector<ops::cpu::GemmShape> shapes;
    {
      ops::cpu::GemmRecorder recorder;
      train_step.run(same_batch, kLr);
      shapes = recorder.shapes();
    }
    std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool>, int> counts;
    for (const auto& s : shapes) counts[{s.trans_a, s.trans_b, s.M, s.N, s.K, s.accumulate}]++;
    double floor_s = 0, gemm_flops = 0;
    std::printf("GEMM floor (%zu sgemm calls, %zu shapes, %s):\n", shapes.size(), counts.size(),
                ops::cpu::gemm_uses_blas() ? "OpenBLAS" : "portable loops");
    for (const auto& [key, count] : counts) {
      const auto& [ta, tb, M, N, K, acc] = key;
      const ops::cpu::GemmShape s{ta, tb, M, N, K, acc};
      const double t = time_gemm(s, static_cast<int>(gemm_repeats));
      floor_s += t * count;
      gemm_flops += s.flops() * count;
      std::printf("  %dx %c%c M=%-6lld N=%-6lld K=%-6lld %8.2f ms each, %6.1f GFLOP/s\n", count, ta ? 'T' : 'N',
                  tb ? 'T' : 'N', static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                  t * 1e3, s.flops() / t / 1e9);
    }
    std::printf("GEMM floor: %.1f ms (%.1f GFLOP at %.1f GFLOP/s); step / floor = %.2f\n", floor_s * 1e3,
                gemm_flops / 1e9, gemm_flops / floor_s / 1e9, step.median / floor_s);
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
