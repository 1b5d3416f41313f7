#include "ch10_gpt2/bench/step_bench.h"

#include <algorithm>

#include "ch07_memory/max_batch.h"
#include "ch07_memory/memory_staircase.h"
#include "common/util/rng.h"

namespace lab {

namespace {

constexpr double kLr = 1e-4;

}  // namespace

void StepBenchSettings::register_flags(Flags& flags) {
  flags.add_string("model", &model, "model size: d12, d24, d36, d48, small, tiny");
  flags.add_string("device", &device, "cpu, cuda, cuda:N or auto");
  flags.add_choice("dtype", &dtype, {"fp32", "tf32", "bf16", "fp16"},
                   "math precision (tf32: GPU; bf16, fp16: mixed precision, common/train/math_mode.h)");
  flags.add_choice("kernels", &kernels, {"reference", "fused"},
                   "reference: the core's kernels; fused: chapter 6's fused kernels (ch06_single_gpu/fused_model.h)");
  flags.add_choice("attention", &attention, ch09::attention_names(),
                   "materialized: the T x T probabilities; batched: the same in 16-bit storage; flash: chapter 9's "
                   "flash attention; flash-one-pass: its backward in one pass; flash-tuned: its fastest kernel set "
                   "(ch09_advanced/attention_choice.h)");
  flags.add_choice("recompute", &recompute, ch07::recompute_policy_names(),
                   "activation recompute: none, selective (attention probabilities and GELU), block (whole blocks)");
  flags.add_choice("lm-head", &lm_head, ch07::lm_head_names(),
                   "full: every token's logits kept until backward; chunked: the head, its loss and gradients chunk "
                   "by chunk in forward (ch07_memory/chunked_lm_head.h)");
  flags.add_int("lm-head-rows", &lm_head_rows, "rows per chunk of --lm-head chunked (0: its default)", 0,
                int64_t{1} << 40);
  flags.add_choice("activations", &activations, activations_names(),
                   "fp32, or 16bit: the activations in the --dtype's 16-bit type end to end (ch10_gpt2/model_rungs.h)");
  flags.add_bool("cuda-graphs", &cuda_graphs,
                 "replay the step from a CUDA graph captured after an eager step (chapter 9, ch09_advanced/"
                 "graphed_step.h); the step is then one launch, timed whole");
  flags.add_int("batch", &batch, "batch size B", 1, 1 << 16);
  flags.add_string("batch-fits", &batch_fits,
                   "instead of --batch, the largest batch whose step's allocator peak fits this many bytes (8GiB, "
                   "512MiB), searched with measured steps first (ch07_memory/max_batch.h)");
  flags.add_int("accumulate", &accumulate, "micro-batches of --batch rows per step, gradients accumulated", 1, 4096);
  flags.add_int("seq", &seq, "sequence length T", 1, 1 << 16);
  flags.add_int("steps", &steps, "timed steps", 1, 100000);
  flags.add_int("warmup", &warmup, "untimed steps first", 0, 1000);
}

ModelRungs StepBenchSettings::model_rungs() const {
  return ModelRungs::parse(kernels, attention, recompute, activations, lm_head, lm_head_rows);
}

StepBenchSettings StepBenchSettings::from_flags(const std::vector<std::string>& flags) {
  StepBenchSettings settings;
  Flags parser("gpt2_step_bench", "a staircase rung's settings");
  settings.register_flags(parser);
  parser.parse(flags);
  return settings;
}

RunConfig StepBenchSettings::run_config() const {
  RunConfig config;
  config.model = GPT2Config::from_name(model);
  config.device = parse_device_or_auto(device);
  config.math = parse_math_mode(dtype);
  config.rungs = model_rungs();
  // The step the trainer runs (one micro-batch, clipping at 1), with the device synchronised between its phases to
  // time each one (not under CUDA graphs, where the step is one launch).
  config.step.time_phases = !cuda_graphs;
  config.step.accum_steps = accumulate;
  config.cuda_graphs = cuda_graphs;
  return config;
}

StepBench::StepBench(const StepBenchSettings& settings) : settings_(settings) {
  const RunConfig config = settings_.run_config();
  device_ = config.device;
  if (!settings_.batch_fits.empty()) settings_.batch = search_batch(config);
  run_ = build_run(config);  // weights from seed 1
  Rng rng(2);
  const int64_t rows = settings_.batch * settings_.accumulate;
  std::vector<int32_t> tok(static_cast<size_t>(rows * settings_.seq)), tgt(tok.size());
  for (auto& x : tok) x = static_cast<int32_t>(rng.below(50257));
  for (auto& x : tgt) x = static_cast<int32_t>(rng.below(50257));
  // Each step's micro-batches in turn: rows [i * batch, (i + 1) * batch) of the step's tokens.
  micro_batches_ = ch07::micro_batches_of(
      {Tensor::from_ints(tok, {rows, settings_.seq}, device_), Tensor::from_ints(tgt, {rows, settings_.seq}, device_)},
      settings_.batch);
}

int64_t StepBench::search_batch(const RunConfig& config) {
  LAB_CHECK(settings_.batch_fits != "earlier-rungs", InvalidArgument,
            "--batch-fits earlier-rungs means the highest peak of a staircase's earlier rungs, inside a staircase "
            "only; give a size (8GiB)");
  const int64_t budget = ch07::parse_byte_size(settings_.batch_fits);
  // An eager step of one micro-batch measures each trial (a graph would capture one batch shape); the probe is
  // gone, and the peak reset, before the bench's own run is built.
  RunConfig probe_config = config;
  probe_config.cuda_graphs = false;
  probe_config.step.time_phases = false;
  probe_config.step.accum_steps = 1;
  int64_t rows = 0;
  {
    TrainingRun probe = build_run(probe_config);
    const ch07::MaxBatchSearch found = ch07::find_max_batch(*probe.step, settings_.seq, budget, int64_t{1} << 16);
    LAB_CHECK(found.rows > 0, InvalidArgument, "--batch-fits ", settings_.batch_fits, ": not even one row of ",
              settings_.seq, " tokens fits (its step peaks at ", found.trials.front().peak_bytes, " bytes)");
    rows = found.rows;
  }
  allocator_for(device_).reset_peak();
  return rows;
}

TrainStepResult StepBench::run_step() {
  return run_.run(micro_batches_, kLr);
}

StepSamples StepBench::run(const std::function<void(int64_t, double)>& on_step) {
  const int64_t warmup = run_.graphed ? std::max<int64_t>(settings_.warmup, 2) : settings_.warmup;
  for (int64_t i = 0; i < warmup; ++i) run_step();
  StepSamples samples;
  for (int64_t i = 0; i < settings_.steps; ++i) {
    const TrainStepResult p = run_step();
    if (run_.graphed) {
      samples.step.push_back(p.seconds);
    } else {
      samples.forward.push_back(p.forward_seconds);
      samples.backward.push_back(p.backward_seconds);
      samples.optimizer.push_back(p.optimizer_seconds);
      samples.step.push_back(p.forward_seconds + p.backward_seconds + p.optimizer_seconds);
    }
    if (on_step) on_step(i, samples.step.back());
  }
  return samples;
}

std::vector<ops::cpu::GemmShape> StepBench::record_gemm_shapes() {
  ops::cpu::GemmRecorder recorder;
  run_step();
  return recorder.shapes();
}

void StepBench::run_one_step() {
  run_step();
}

}  // namespace lab
