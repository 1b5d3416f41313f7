// Every setting of the GPT-2 trainer, its command-line flags, and the named presets.
//
// A preset is a list of flags applied before the command line, so anything given explicitly overrides it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/util/flags.h"
#include "common/util/json.h"

namespace lab {

struct TrainOptions {
  // data
  std::string data_train;          // shard file or glob; empty: the bundled tiny Shakespeare, tokenized on first use
  std::string data_val;            // empty with data_train given: no evaluation (the trainer says so)
  std::string loader = "sync";     // a chapter 5 loader stage: sync, mmap, prefetch, pinned
  int64_t loader_depth = 4;        // batches the background stages read ahead
  int64_t loader_workers = 2;      // their reader threads
  int64_t slow_read_us = 0;        // simulated slow source: latency per batch read
  int64_t slow_preprocess_us = 0;  // and CPU time of preprocessing per batch
  bool shuffle = false;
  // model
  std::string model;  // a GPT2Config name; empty: "small", or the config of --init / --resume (which must match)
  std::string init;   // safetensors weights to start from
  // batch and schedule
  int64_t batch = 16;
  int64_t seq = 64;
  int64_t total_batch_tokens = 0;  // 0: one micro-batch per step; else gradient accumulation up to this
  int64_t steps = 300;
  double lr = 2e-3;
  double lr_min_fraction = 0.1;
  int64_t warmup_steps = 20;
  int64_t lr_decay_steps = 0;  // horizon of the decay; 0: --steps
  std::string lr_schedule = "cosine";
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;
  // parallel layout (under mpirun; chapter 8)
  int64_t dp = 0;  // data-parallel ranks; 0: the ranks left over, world size / (tp * pp)
  int64_t tp = 1;  // tensor-parallel ranks
  int64_t pp = 1;  // pipeline stages
  std::string dp_stage = "overlap";
  double bucket_mb = 25;
  int64_t micro_batches = 1;  // per pipeline per step
  std::string pp_schedule = "1f1b";
  int64_t comm_timeout = 300;  // seconds a collective waits for the other ranks
  // how the step holds optimizer state and gradients (chapter 7)
  bool optimizer_in_backward = false;  // each parameter's update as soon as its gradient is final
  std::string offload = "none";        // none, or optimizer: AdamW's state in host memory, the update on the CPU
  int64_t zero = 0;                    // ZeRO stage over the data-parallel ranks (1, 2, 3); 0: none
  bool zero_prefetch = false;          // ZeRO-3: gather the next block while the current one computes
  // execution
  std::string device = "auto";
  std::string dtype = "fp32";              // fp32, tf32, bf16 or fp16 (common/train/math_mode.h)
  double loss_scale = 65536.0;             // fp16: the initial loss scale (common/train/loss_scaler.h)
  int64_t loss_scale_interval = 2000;      // fp16: clean steps before the scale doubles
  int64_t threads = 0;                     // 0: all cores
  std::string kernels = "reference";       // reference, or fused: chapter 6's kernels (ch06_single_gpu/fused_model.h)
  std::string attention = "materialized";  // or flash: chapter 9's (ch09_advanced/attention_choice.h)
  std::string activations = "fp32";        // or 16bit: the --dtype's 16-bit type end to end (model_rungs.h)
  bool cuda_graphs = false;                // replay the step from a CUDA graph (ch09_advanced/graphed_step.h)
  int64_t seed = 1337;
  // output
  std::string log_json;
  std::string save;
  int64_t save_every = 0;
  std::string resume;
  int64_t eval_every = 50;
  int64_t val_batches = 20;
  int64_t sample_every = 0;
  int64_t sample_tokens = 96;
  std::string preset;
  // memory (chapter 7)
  int64_t profile = 0;             // print the ops and kernels of this step (1-based; 0: none)
  bool memory_report = false;      // print live/peak bytes by category against theory after the first step
  std::string memory_snapshot;     // write the first step's allocation timeline here (JSON)
  std::string recompute = "none";  // activation recompute: none, selective, block
  std::string lm_head = "full";    // or chunked: the head and its loss chunk by chunk, no logits kept
  int64_t lm_head_rows = 0;        // the chunked head's rows per chunk (0: its default)
  bool find_max_batch = false;     // search the largest micro-batch within memory_budget, then exit
  std::string memory_budget = "8GiB";
  // Not flags: the command line (recorded in the log's header) and the flags the preset set that the command
  // line left alone, as {name without "--", value}.
  std::string command;
  std::vector<std::pair<std::string, std::string>> preset_flags;

  // Registers every flag on `flags`, bound to the fields above.
  void register_flags(Flags& flags);
  // Checks the combination of values (Error(InvalidArgument) naming the flag).
  void validate() const;
  // The settings a resumed run must share with the run that wrote the checkpoint.
  Json to_json() const;
  // `message`, with a note naming the preset when it speaks of a flag whose value came from the preset.
  std::string with_preset_note(const std::string& message) const;
};

// Where the default run keeps its result when no --save is given: a fresh directory under `parent`, named by
// the local date and time (runs/20261125-031500, or runs/20261125-031500-2 when that one exists).
std::string fresh_run_directory(const std::string& parent = "runs");

// Parses argv: the preset named by --preset (if any) first, then the command line on top. The default run (no
// --model, --init, --resume or --data-train) saves its checkpoint to fresh_run_directory() unless --save is
// given (`--save ''`: none).
// Returns false when --help was asked for (and printed, when `print_help`: rank 0 of a distributed run).
bool parse_train_options(int argc, char** argv, TrainOptions& options, bool print_help = true);

struct Preset {
  std::string name;
  std::string description;
  std::vector<std::string> flags;
};
const std::vector<Preset>& train_presets();

}  // namespace lab
