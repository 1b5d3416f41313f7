#include "ch10_gpt2/train_options.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "ch05_data/loaders/make_loader.h"
#include "ch07_memory/chunked_lm_head.h"
#include "ch07_memory/max_batch.h"
#include "ch07_memory/recompute.h"
#include "ch08_distributed/parallel_options.h"
#include "ch09_advanced/attention_choice.h"
#include "ch10_gpt2/model_rungs.h"
#include "common/bench/result.h"
#include "common/core/error.h"

namespace lab {

void TrainOptions::register_flags(Flags& f) {
  f.add_string("data-train", &data_train,
               "training shards: a file or a glob (default: the bundled tiny Shakespeare, training split)");
  f.add_string("data-val", &data_val,
               "validation shards: a file or a glob (default: the bundled corpus's validation split; with "
               "--data-train: none, and no validation loss)");
  f.add_choice("loader", &loader, ch05::loader_stages(), "data loader stage (chapter 5)");
  f.add_int("loader-depth", &loader_depth, "batches the prefetch and pinned loaders read ahead", 1, 1024);
  f.add_int("loader-workers", &loader_workers, "reader threads of the prefetch and pinned loaders", 1, 256);
  f.add_int("slow-read-us", &slow_read_us, "simulated storage latency per batch read, in microseconds", 0, 60'000'000);
  f.add_int("slow-preprocess-us", &slow_preprocess_us,
            "simulated CPU preprocessing per batch, in microseconds of CPU time", 0, 60'000'000);
  f.add_bool("shuffle", &shuffle, "shuffle shard order and batch positions every epoch (seeded)");
  f.add_string("model", &model,
               "model size: d12, d24, d36, d48, small, tiny (default: small; with --init or --resume, the file's "
               "model, which --model must match if given)");
  f.add_string("init", &init, "start from these safetensors weights (Hugging Face GPT-2 names)");
  f.add_int("batch", &batch, "micro-batch size B", 1, 1 << 20);
  f.add_int("seq", &seq, "sequence length T", 1, 1 << 20);
  f.add_int("total-batch-tokens", &total_batch_tokens,
            "tokens per optimizer step, all data-parallel ranks together; a multiple of B*T*dp accumulates "
            "gradients (0: B*T*dp)",
            0, int64_t{1} << 40);
  f.add_int("steps", &steps, "total optimizer steps (a resumed run counts the steps already done)", 0,
            int64_t{1} << 40);
  f.add_float("lr", &lr, "peak learning rate", 0.0, 10.0);
  f.add_float("lr-min-fraction", &lr_min_fraction, "decay ends at lr * this", 0.0, 1.0);
  f.add_int("warmup-steps", &warmup_steps, "linear warmup steps", 0, int64_t{1} << 40);
  f.add_int("lr-decay-steps", &lr_decay_steps, "decay horizon in steps (0: --steps)", 0, int64_t{1} << 40);
  f.add_choice("lr-schedule", &lr_schedule, {"constant", "cosine", "linear"}, "learning-rate schedule");
  f.add_float("weight-decay", &weight_decay, "AdamW weight decay on 2-D weights", 0.0, 10.0);
  f.add_float("beta1", &beta1, "AdamW beta1", 0.0, 0.999999);
  f.add_float("beta2", &beta2, "AdamW beta2", 0.0, 0.999999);
  f.add_float("grad-clip", &grad_clip, "clip the global gradient norm to this (0: off)", 0.0, 1e9);
  f.add_int("dp", &dp, "data-parallel ranks (under mpirun; 0: the ranks left over by --tp and --pp)", 0, 1 << 20);
  f.add_int("tp", &tp, "tensor-parallel ranks (under mpirun)", 1, 1 << 20);
  f.add_int("pp", &pp, "pipeline-parallel stages (under mpirun)", 1, 1 << 20);
  f.add_choice("dp-stage", &dp_stage, dist::dp_stage_names(),
               "how data-parallel ranks average gradients: per tensor, flat buckets, or buckets overlapped with "
               "backward");
  f.add_float("bucket-mb", &bucket_mb, "gradient bucket size of the bucketed and overlapped stages, in MiB", 1e-3, 1e6);
  f.add_int("micro-batches", &micro_batches, "micro-batches per pipeline per step (with --pp)", 1, 1 << 20);
  f.add_choice("pp-schedule", &pp_schedule, ch08::pp_schedule_names(), "pipeline schedule (with --pp)");
  f.add_int("comm-timeout", &comm_timeout, "seconds a collective waits for the other ranks before the run fails", 1,
            int64_t{1} << 30);
  f.add_bool("optimizer-in-backward", &optimizer_in_backward,
             "update each parameter as soon as its gradient is final and free the gradient at once (one process; "
             "needs --grad-clip 0 and no gradient accumulation)");
  f.add_choice("offload", &offload, {"none", "optimizer"},
               "optimizer: AdamW's moments and fp32 master weights in pinned host memory, the update on the CPU (a "
               "GPU run; on the CPU the state is in host memory already and nothing changes)");
  f.add_int("zero", &zero,
            "ZeRO stage over the data-parallel ranks: 1 shards the optimizer state, 2 also the gradients, 3 also "
            "the parameters, gathered per block when used (0: off)",
            0, 3);
  f.add_bool("zero-prefetch", &zero_prefetch,
             "with --zero 3: all-gather the next block's weights on a second communicator while the current block "
             "computes (two blocks whole at once)");
  f.add_string("device", &device,
               "cpu, cuda, cuda:N or auto (a GPU when present; under mpirun, rank r takes GPU r "
               "mod the GPUs visible)");
  f.add_string("dtype", &dtype,
               "math precision: fp32; tf32 (GPU); bf16 or fp16: mixed precision, 16-bit matrix products with fp32 "
               "accumulation and fp32 master weights, fp16 with dynamic loss scaling (chapter 6)");
  f.add_float("loss-scale", &loss_scale, "fp16: the initial loss scale", 1.0, 1e38);
  f.add_int("loss-scale-interval", &loss_scale_interval, "fp16: steps without overflow before the loss scale doubles",
            1, int64_t{1} << 40);
  f.add_choice("kernels", &kernels, {"reference", "fused"},
               "reference: the core's kernels; fused: chapter 6's fused residual + LayerNorm, GEMM + bias + GELU and "
               "classifier");
  f.add_choice("attention", &attention, ch09::attention_names(),
               "materialized: the T x T probabilities kept for backward; batched: the same in the --dtype's 16-bit "
               "storage (tensor cores, probabilities in 16 bits); flash: chapter 9's flash attention, one log-sum-exp "
               "per row kept instead (memory grows as T, not T^2), in the --dtype's matmul storage; flash-one-pass: "
               "the same with its backward in one pass (dQ by f32 atomics on a GPU: the last bits vary run to run); "
               "flash-tuned: flash with the fastest of its kernel sets on the GPU (the same bits), timed at the first "
               "step");
  f.add_choice("activations", &activations, activations_names(),
               "fp32: mixed precision rounds only the matmuls' operands; 16bit: the activations between the ops in "
               "the --dtype's 16-bit type end to end, half the bytes, no conversion between ops (needs --dtype bf16 "
               "or fp16; one process)");
  f.add_bool("cuda-graphs", &cuda_graphs,
             "capture the training step in a CUDA graph after one eager step and replay it at every later step "
             "(chapter 9: any --dtype; --dp, --tp, --pp and --zero over NCCL; not with --zero-prefetch, --profile, "
             "--find-max-batch, --optimizer-in-backward or --offload)");
  f.add_int("threads", &threads, "CPU threads (0: all cores)", 0, 4096);
  f.add_int("seed", &seed, "seed of initialisation, shuffling and sampling", 0, INT64_MAX);
  f.add_string("log-json", &log_json, "write one JSON object per step (and per evaluation) to this file");
  f.add_string("save", &save,
               "write a checkpoint directory here at the end (and every --save-every steps); the default run (no "
               "--model, --init, --resume or --data-train) saves to runs/<date>-<time> unless given --save '' (none)");
  f.add_int("save-every", &save_every, "checkpoint interval in steps (0: only at the end)", 0, int64_t{1} << 40);
  f.add_string("resume", &resume, "continue from this checkpoint directory");
  f.add_int("eval-every", &eval_every, "validation interval in steps (0: only at the end)", 0, int64_t{1} << 40);
  f.add_int("val-batches", &val_batches, "validation batches per evaluation (0: the whole split)", 0, int64_t{1} << 40);
  f.add_int("sample-every", &sample_every, "sampling interval in steps (0: only at the end)", 0, int64_t{1} << 40);
  f.add_int("sample-tokens", &sample_tokens, "tokens to sample (0: no sampling)", 0, 1 << 20);
  f.add_int("profile", &profile,
            "count and time every op and kernel of step N (1-based) and print the tables after it "
            "(common/core/step_profile.h; 0: off)",
            0, int64_t{1} << 40);
  f.add_bool("memory-report", &memory_report,
             "after the first step, print live and peak bytes by category beside theory, and the process's "
             "resident memory against the allocator's");
  f.add_string("memory-snapshot", &memory_snapshot,
               "write the first step's allocation timeline (every alloc/free: size, category, op) to this JSON "
               "file (scripts/plot_memory.py draws it)");
  f.add_choice(
      "recompute", &recompute, ch07::recompute_policy_names(),
      "activation recompute: none, selective (attention probabilities and GELU), selective-ln (and the LayerNorm "
      "outputs), block (whole blocks)");
  f.add_choice("lm-head", &lm_head, ch07::lm_head_names(),
               "full: the logits of every token kept (as their gradient) until backward; chunked: the LM head, its "
               "loss and its gradients chunk by chunk in the forward pass, the [B, T, vocab] logits never whole "
               "(chapter 7; one tensor-parallel rank, not with --zero 2|3)");
  f.add_int("lm-head-rows", &lm_head_rows,
            "rows per chunk of --lm-head chunked (0: the default, chunks whose logits are about the head input's "
            "size; more rows: larger products, more memory)",
            0, int64_t{1} << 40);
  f.add_bool("find-max-batch", &find_max_batch,
             "measure steps to find the largest micro-batch (--batch) whose peak fits --memory-budget, with the "
             "other flags as given, print it and exit without training");
  f.add_string("memory-budget", &memory_budget, "the budget of --find-max-batch: 8GiB, 512MiB, 8GB, bytes");
  std::string names;
  for (const Preset& p : train_presets()) names += (names.empty() ? "" : ", ") + p.name;
  f.add_string("preset", &preset, "a named set of flags: " + names);
}

void TrainOptions::validate() const {
  LAB_CHECK(total_batch_tokens == 0 || total_batch_tokens % (batch * seq) == 0, InvalidArgument,
            "--total-batch-tokens ", total_batch_tokens, " is not a multiple of --batch * --seq = ", batch * seq);
  LAB_CHECK(init.empty() || resume.empty(), InvalidArgument, "--init and --resume exclude each other");
  LAB_CHECK(dtype == "fp32" || dtype == "tf32" || dtype == "bf16" || dtype == "fp16", InvalidArgument, "--dtype: '",
            dtype, "' is not one of fp32|tf32|bf16|fp16");
  LAB_CHECK(data_val.empty() || !data_train.empty(), InvalidArgument, "--data-val given without --data-train");
  try {
    ch07::parse_byte_size(memory_budget);
  } catch (const Error& e) {
    fail(ErrorKind::InvalidArgument, "--memory-budget: ", e.what());
  }
  LAB_CHECK(profile <= steps, InvalidArgument, "--profile ", profile, " is beyond --steps ", steps);
  LAB_CHECK(!cuda_graphs || profile == 0, InvalidArgument,
            "--cuda-graphs with --profile: a replayed graph's kernels cannot be timed one by one (profile without "
            "--cuda-graphs)");
  LAB_CHECK(!cuda_graphs || !find_max_batch, InvalidArgument,
            "--cuda-graphs with --find-max-batch: the search measures eager steps (leave --cuda-graphs out)");
  LAB_CHECK(micro_batches == 1 || pp > 1, InvalidArgument, "--micro-batches ", micro_batches,
            " needs pipeline parallelism (--pp > 1); for gradient accumulation use --total-batch-tokens");
}

Json TrainOptions::to_json() const {
  Json j = Json::object();
  j.set("data_train", data_train);
  j.set("data_val", data_val);
  j.set("loader", loader);
  j.set("loader_depth", loader_depth);
  j.set("loader_workers", loader_workers);
  j.set("slow_read_us", slow_read_us);
  j.set("slow_preprocess_us", slow_preprocess_us);
  j.set("shuffle", shuffle);
  j.set("batch", batch);
  j.set("seq", seq);
  j.set("total_batch_tokens", total_batch_tokens);
  j.set("micro_batches", micro_batches);
  j.set("steps", steps);
  j.set("lr", lr);
  j.set("lr_min_fraction", lr_min_fraction);
  j.set("warmup_steps", warmup_steps);
  j.set("lr_decay_steps", lr_decay_steps);
  j.set("lr_schedule", lr_schedule);
  j.set("weight_decay", weight_decay);
  j.set("beta1", beta1);
  j.set("beta2", beta2);
  j.set("grad_clip", grad_clip);
  j.set("dtype", dtype);
  j.set("activations", activations);
  j.set("seed", seed);
  return j;
}

std::string TrainOptions::with_preset_note(const std::string& message) const {
  std::string notes;
  for (const auto& [name, value] : preset_flags) {
    const std::string flag = "--" + name;
    // The flag must appear as a whole word: "--seq" is not in "--sequence".
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
      const size_t end = at + flag.size();
      if (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-'))
        continue;
      notes += cat(notes.empty() ? "" : ", ", flag, " ", value);
      break;
    }
  }
  return notes.empty() ? message : cat(message, " (", notes, " set by --preset ", preset, ")");
}

const std::vector<Preset>& train_presets() {
  static const std::vector<Preset> presets = {
      {"baseline-fp32",
       "GPT-2 124M, fp32 everywhere: the first step of the speed staircase",
       {"--model", "d12", "--dtype", "fp32", "--batch", "4", "--seq", "64"}},
      {"tf32",
       "GPT-2 124M with TF32 tensor-core GEMMs (GPU only)",
       {"--model", "d12", "--dtype", "tf32", "--device", "cuda", "--batch", "16", "--seq", "1024"}},
      {"shakespeare-small", "the default run: a 4-layer model on the bundled tiny Shakespeare", {}},
  };
  return presets;
}

std::string fresh_run_directory(const std::string& parent) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  const std::string base = parent + "/" + stamp;
  std::string dir = base;
  for (int n = 2; std::filesystem::exists(dir); ++n) dir = cat(base, "-", n);
  return dir;
}

bool parse_train_options(int argc, char** argv, TrainOptions& options, bool print_help) {
  Flags flags("gpt2_train",
              "Train GPT-2. With no flags: a small model on the bundled tiny Shakespeare, on the "
              "best device present, ending with a text sample.");
  options.register_flags(flags);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--help" && arg != "-h") continue;
    if (!print_help) return false;
    std::fputs(flags.usage().c_str(), stdout);
    std::fputs("\npresets:\n", stdout);
    for (const Preset& p : train_presets()) std::printf("  %-20s %s\n", p.name.c_str(), p.description.c_str());
    return false;
  }
  // First pass only finds --preset (and rejects unknown flags before any work starts).
  TrainOptions probe = options;
  Flags probe_flags("gpt2_train", "");
  probe.register_flags(probe_flags);
  probe_flags.parse(argc, argv);
  if (!probe.preset.empty()) {
    const Preset* found = nullptr;
    for (const Preset& p : train_presets())
      if (p.name == probe.preset) found = &p;
    LAB_CHECK(found, InvalidArgument, "--preset: unknown preset '", probe.preset, "'");
    flags.parse(found->flags);
    for (size_t i = 0; i + 1 < found->flags.size(); i += 2) {
      const std::string name = found->flags[i].substr(2);
      if (!probe_flags.was_set(name)) options.preset_flags.emplace_back(name, found->flags[i + 1]);
    }
  }
  flags.parse(argc, argv);
  options.command = bench::command_line(argc, argv);
  // The default run is minutes of training on a slow machine: its result is kept (gpt2_sample reads it).
  const bool default_run = options.model.empty() && options.init.empty() && options.resume.empty() &&
                           options.data_train.empty() && !options.find_max_batch;
  if (default_run && !flags.was_set("save")) options.save = fresh_run_directory();
  try {
    options.validate();
  } catch (const Error& e) {
    throw Error(e.kind(), options.with_preset_note(e.what()));
  }
  return true;
}

}  // namespace lab
