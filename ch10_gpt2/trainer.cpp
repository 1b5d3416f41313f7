// The trainer: setup, the loop's callback (log, evaluate, sample, save) and its distributed parts (see trainer.h).
#include "ch10_gpt2/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "ch05_data/loaders/make_loader.h"
#include "ch05_data/tokenize/prepare.h"
#include "ch07_memory/max_batch.h"
#include "ch07_memory/memory_report.h"
#include "ch07_memory/memory_snapshot.h"
#include "ch07_memory/recompute.h"
#include "ch07_memory/zero/parameter_gather.h"
#include "ch08_distributed/pp/evaluation.h"
#include "ch08_distributed/pp/pipeline_step.h"
#include "ch08_distributed/tp/tensor_parallel.h"
#include "ch08_distributed/tp/whole_tensors.h"
#include "ch09_advanced/attention_choice.h"
#include "ch10_gpt2/memory_steps.h"
#include "ch10_gpt2/run_memory_theory.h"
#include "ch10_gpt2/run_settings.h"
#include "ch10_gpt2/sampler.h"
#include "common/bench/gpu_peaks.h"
#include "common/bench/machine.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/comm/device_communicator.h"
#include "common/comm/single_process.h"
#include "common/core/parallel.h"
#include "common/core/step_profile.h"
#include "common/dist/rank_coordination.h"
#ifdef LAB_WITH_CUDA
#include "common/cuda/runtime.h"
#endif
#include "common/io/files.h"
#include "common/nn/gpt2_weights.h"
#include "common/ops/flash_attention.h"
#include "common/train/training_loop.h"

namespace lab {

namespace {

// --profile's tables: the step's ops, and on a GPU its kernels.
void print_profile(const StepProfile& profile, int64_t step) {
  std::printf("profile of step %lld: %lld op calls\n%s", static_cast<long long>(step),
              static_cast<long long>(profile.calls(ProfileKind::Op)), profile.table(ProfileKind::Op).c_str());
  if (profile.calls(ProfileKind::Kernel) > 0)
    std::printf("%lld kernel launches and cuBLAS calls (device time between CUDA events):\n%s",
                static_cast<long long>(profile.calls(ProfileKind::Kernel)), profile.table(ProfileKind::Kernel).c_str());
  std::printf("%s\n", profile.zero_fills().line().c_str());
}

// The settings that must not change between a run and its resumption (they define the batches and the
// optimizer trajectory); the rest (steps, logging, evaluation, device, layout) may. The global micro-batch,
// --batch x dp, and the tokens of a step are checked apart: they may be split differently across
// data-parallel ranks and pipeline micro-batches.
constexpr const char* kResumeInvariants[] = {"seq", "shuffle", "seed", "data_train"};

// The tokens of one optimizer step of the run that wrote a checkpoint: --total-batch-tokens, or else one
// global micro-batch, times the pipeline's --micro-batches (1 in checkpoints written before they were saved);
// -1 when state.json lacks the settings.
int64_t saved_step_tokens(const TrainState& saved) {
  const auto setting = [&](const char* key, int64_t absent) {
    const Json* v = saved.options.find(key);
    return v ? v->as_int() : absent;
  };
  const int64_t total = setting("total_batch_tokens", -1), batch = setting("batch", -1), seq = setting("seq", -1);
  if (total != 0 || batch < 0 || seq < 0) return total;
  const int64_t pipeline_micro = saved.parallel.pp > 1 ? setting("micro_batches", 1) : 1;
  return batch * seq * saved.parallel.dp * pipeline_micro;
}

// Runs `body`; an Error from it is rethrown with the flag it concerns in front, so the one line a user reads
// says which of the command's paths was wrong.
template <typename Body>
auto for_flag(const char* flag, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind(flag, 0) == 0) throw;
    fail(e.kind(), flag, ": ", message);
  }
}

// The device of this rank: --device as given, except that a GPU named without an index ("cuda", or "auto" on
// a machine with GPUs) is GPU rank mod the GPUs visible, so that the ranks of a node share its GPUs out.
Device device_of_rank(const std::string& flag, int rank, int ranks) {
  Device device = for_flag("--device", [&] { return parse_device_or_auto(flag); });
#ifdef LAB_WITH_CUDA
  if (device.is_cuda() && ranks > 1 && flag.find(':') == std::string::npos && cuda_available())
    device = Device::cuda(rank % cuda::device_count());
#else
  (void)rank;
  (void)ranks;
#endif
  return device;
}

}  // namespace

Trainer::Trainer(TrainOptions options) : Trainer(std::move(options), nullptr) {}

Trainer::Trainer(TrainOptions options, comm::Communicator& world) : Trainer(std::move(options), &world) {}

Trainer::Trainer(TrainOptions options, comm::Communicator* world) : options_(std::move(options)), world_(world) {
  if (!world_) {
    single_process_world_ = std::make_unique<comm::SingleProcessCommunicator>();
    world_ = single_process_world_.get();
  }
  world_->set_timeout(std::chrono::seconds(options_.comm_timeout));
  // The run as typed settings (the model comes from the checkpoint or the weights file, below); what cannot train
  // together is refused as soon as they are known, before any output is prepared or any data read.
  ch08::ParallelOptions& parallel = run_config_.parallel;
  parallel.layout = ch08::resolve_layout(options_.dp, options_.tp, options_.pp, world_->size());
  parallel.dp_stage = dist::parse_dp_stage(options_.dp_stage);
  parallel.bucket_bytes = static_cast<int64_t>(options_.bucket_mb * (1 << 20));
  parallel.micro_batches = options_.micro_batches;
  parallel.pp_schedule = ch08::parse_pp_schedule(options_.pp_schedule);
  if (options_.threads > 0) set_num_threads(static_cast<int>(options_.threads));
  run_config_.device = device_of_rank(options_.device, world_->rank(), world_->size());
  LAB_CHECK(!device().is_cuda() || cuda_available(), Unsupported, "--device ", options_.device,
            ": no CUDA GPU is available", (cuda_available() ? "" : " (or this build has no CUDA backend)"));
  run_config_.math = parse_math_mode(options_.dtype);
  run_config_.rungs = ModelRungs::parse(options_.kernels, options_.attention, options_.recompute, options_.activations,
                                        options_.lm_head, options_.lm_head_rows);
  run_config_.memory = {options_.optimizer_in_backward, options_.offload == "optimizer",
                        static_cast<int>(options_.zero), options_.zero_prefetch};
  run_config_.adamw = {static_cast<float>(options_.beta1), static_cast<float>(options_.beta2), 1e-8f,
                       static_cast<float>(options_.weight_decay)};
  run_config_.loss_scaling = {options_.loss_scale, 2.0, 0.5, options_.loss_scale_interval};
  run_config_.cuda_graphs = options_.cuda_graphs;
  // A step's global batch is micro-batches of B x T on each data-parallel rank, accumulated up to
  // --total-batch-tokens (a pipeline's step: its --micro-batches).
  const int64_t micro_per_step =
      micro_batches_per_rank_step(options_.total_batch_tokens, options_.batch, options_.seq, parallel);
  run_config_.step = {micro_per_step, options_.grad_clip, false};
  check_run(run_config_);

  // The outputs first: a destination that cannot be written, or that holds a user's files, stops the run
  // before any data is read or any model is built. Rank 0 alone writes them.
  if (!options_.save.empty() && leader())
    for (const std::string& note : for_flag("--save", [&] { return prepare_checkpoint_destination(options_.save); }))
      std::printf("--save: %s\n", note.c_str());
  log_ = for_flag("--log-json", [&] {
    return std::make_unique<JsonLog>(leader() ? options_.log_json : std::string(), !options_.resume.empty());
  });
  if (!options_.memory_snapshot.empty() && leader())
    for_flag("--memory-snapshot", [&] {
      ch07::MemorySnapshot::check_destination(options_.memory_snapshot);
      return 0;
    });

  const TrainState resumed = read_resume_state();
  start_step_ = resumed.step;
  const GPT2Config config = model_config(resumed);
  // Before the data: a sequence longer than the model can read is the cause to name, whatever the data hold.
  LAB_CHECK(options_.seq <= config.block_size, InvalidArgument, "--seq ", options_.seq,
            " exceeds the model's block size ", config.block_size, " (its position embedding has ", config.block_size,
            " rows)");
  setup_parallel();
  setup_data();
  run_config_.model = config;
  sample_rng_.reseed(static_cast<uint64_t>(options_.seed) ^ 0x5a5a5a5aull);
  // This rank's shard of the model with the rungs installed, its optimizer, the weights (ZeRO stage 3's step shards
  // them as they are) and the step.
  run_ = build_run(run_config_, *context_, [&](GPT2& model, AdamW& optimizer) {
    if (!options_.resume.empty()) {
      if (optimizer.sharded()) {  // ZeRO: the checkpoint's whole state, then this rank's shard of it
        AdamW whole(model.parameters(), optimizer.config());
        load_checkpoint(options_.resume, model, whole);
        ch07::load_optimizer_shard(whole, optimizer);
      } else {
        load_checkpoint(options_.resume, model, optimizer);
      }
    } else if (!options_.init.empty()) {
      for_flag("--init", [&] {
        load_gpt2_weights(model, options_.init);
        return 0;
      });
      if (leader())
        std::printf("--init: loaded %.1fM parameters from %s (%s)\n",
                    static_cast<double>(config.num_parameters()) / 1e6, options_.init.c_str(), config.str().c_str());
    } else {
      model.init_weights(static_cast<uint64_t>(options_.seed));
    }
  });
  if (!options_.resume.empty()) {
    train_loader_->seek(resumed.loader_position);
    sample_rng_.set_state(resumed.rng);
    if (run_.step->loss_scaler() && resumed.loss_scaler) run_.step->set_loss_scaler_state(*resumed.loss_scaler);
  }
  if (const std::string note =
          ch09::attention_note(run_config_.rungs.attention, device(), matmul_dtype(run_config_.math));
      !note.empty() && leader())
    std::printf("%s\n", note.c_str());

  schedule_.kind = LrSchedule::parse_kind(options_.lr_schedule);
  schedule_.max_lr = options_.lr;
  schedule_.warmup_steps = options_.warmup_steps;
  schedule_.total_steps = options_.lr_decay_steps > 0 ? options_.lr_decay_steps : options_.steps;
  schedule_.min_lr_fraction = options_.lr_min_fraction;

  flops_per_token_ = gpt2_flops_per_token(run_.model->config(), options_.seq);
  if (device().is_cuda()) {  // the whole job's peak: every rank's GPU
    const auto peak = bench::gpu_peak_flops(device_name(device()), run_config_.math);
    if (peak) {
      peak_flops_ = peak->flops * world_->size();
      peak_name_ = peak->entry;
    }
  }
  if (!leader()) return;
  std::printf("model: %s, %.1fM parameters, on %s (%s)\n", run_.model->config().str().c_str(),
              static_cast<double>(run_.model->config().num_parameters()) / 1e6, device().str().c_str(),
              device_name(device()).c_str());
  std::printf("batch: %s%lld x %lld tokens, %lld micro-batch(es) per step, %lld steps, %s loader, %d CPU threads\n",
              layout().dp > 1 ? cat(layout().dp, " ranks x ").c_str() : "", static_cast<long long>(options_.batch),
              static_cast<long long>(options_.seq), static_cast<long long>(accum_steps()),
              static_cast<long long>(options_.steps), train_loader_->name().c_str(), num_threads());
  if (device().is_cuda())
    std::printf("MFU peak: %s\n",
                peak_flops_ ? cat(peak_name_, " ", options_.dtype, " ", *peak_flops_ / 1e12, " TFLOP/s").c_str()
                            : "unknown GPU: peak not known, MFU not reported");
  if (run_.graphed)
    std::printf(
        "--cuda-graphs: the first step runs eagerly (filling the graph's memory pool), the second is captured, and "
        "every step from then on is one graph launch\n");
  if (!val_loader_)
    std::printf("validation: none (--data-train without --data-val), so no validation loss is computed\n");
  if (start_step_ > 0)
    std::printf("resumed from %s at step %lld\n", options_.resume.c_str(), static_cast<long long>(start_step_));
  std::fflush(stdout);
}

Trainer::~Trainer() = default;

void Trainer::setup_parallel() {
  device_comm_ = comm::communicator_for(*world_, device());
  context_ = std::make_unique<comm::ParallelContext>(*device_comm_, layout());
  if (world_->size() == 1) return;
  const std::vector<std::string> lines = dist::gather_lines(*world_, context_->describe());
  if (!leader()) return;
  std::printf("parallel: %s on %d ranks (%s), data-parallel stage %s (buckets of %g MiB)\n", layout().str().c_str(),
              world_->size(), device_comm_->backend().c_str(), options_.dp_stage.c_str(), options_.bucket_mb);
  for (const std::string& line : lines) std::printf("  %s\n", line.c_str());
}

TrainState Trainer::read_resume_state() const {
  if (options_.resume.empty()) return {};
  // Reading may first recover the directory from an interrupted save: rank 0 does, before the others read.
  const auto read = [&] { return for_flag("--resume", [&] { return read_checkpoint_state(options_.resume); }); };
  TrainState resumed;
  if (leader()) resumed = read();
  world_->barrier();
  if (!leader()) resumed = read();
  const Json* saved_batch = resumed.options.find("batch");
  const int64_t saved_micro = saved_batch ? saved_batch->as_int() * resumed.parallel.dp : -1;
  LAB_CHECK(saved_micro == options_.batch * layout().dp, InvalidArgument,
            "--resume: the global micro-batch --batch x dp was ", saved_batch ? saved_batch->dump() : "absent", " x ",
            resumed.parallel.dp, " in ", options_.resume, ", now ", options_.batch, " x ", layout().dp,
            " (a checkpoint resumes under another data-parallel size only with the same --batch x dp)");
  for (const char* key : kResumeInvariants) {
    const Json* saved = resumed.options.find(key);
    LAB_CHECK(saved && saved->dump() == options_.to_json().at(key).dump(), InvalidArgument, "--resume: '", key,
              "' was ", (saved ? saved->dump() : "absent"), " in ", options_.resume, ", now ",
              options_.to_json().at(key).dump());
  }
  const int64_t step_tokens = options_.batch * options_.seq * layout().dp * accum_steps();
  LAB_CHECK(saved_step_tokens(resumed) == step_tokens, InvalidArgument, "--resume: a step was ",
            saved_step_tokens(resumed), " tokens in ", options_.resume, ", now ", step_tokens,
            " (--total-batch-tokens, or --batch x --seq x dp x --micro-batches under --pp)");
  LAB_CHECK(resumed.step < options_.steps, InvalidArgument, "--resume: the checkpoint ", options_.resume,
            " is already at step ", resumed.step, ", and --steps ", options_.steps,
            " counts the total, so there is nothing to train (give --steps above ", resumed.step, ")");
  return resumed;
}

GPT2Config Trainer::model_config(const TrainState& resumed) const {
  if (options_.resume.empty() && options_.init.empty())
    return GPT2Config::from_name(options_.model.empty() ? "small" : options_.model);
  // The checkpoint or the weights file carries the model; a --model given as well must name the same one.
  const bool resuming = !options_.resume.empty();
  const char* flag = resuming ? "--resume" : "--init";
  const std::string& file = resuming ? options_.resume : options_.init;
  const GPT2Config config = resuming ? resumed.config : for_flag(flag, [&] { return read_gpt2_config(file); });
  if (!options_.model.empty()) {
    const GPT2Config named = GPT2Config::from_name(options_.model);
    LAB_CHECK(named == config, InvalidArgument, "--model ", options_.model, " (", named.str(), ") is not the model in ",
              file, " (", config.str(), "): ", flag, " takes the model from the file, so leave --model out");
  }
  return config;
}

void Trainer::setup_data() {
  std::string train = options_.data_train, val = options_.data_val;
  if (train.empty()) {
    const ch05::DatasetFiles files = ch05::prepare_tinyshakespeare(std::string(LAB_BINARY_DIR) + "/data_cache");
    train = files.train_pattern;
    val = files.val_pattern;
  }
  LoaderOptions lo;
  lo.batch = options_.batch;
  lo.seq = options_.seq;
  lo.shuffle = options_.shuffle;
  lo.seed = static_cast<uint64_t>(options_.seed);
  lo.depth = static_cast<int>(options_.loader_depth);
  lo.workers = static_cast<int>(options_.loader_workers);
  lo.slow = {options_.slow_read_us, options_.slow_preprocess_us};
  // Data-parallel rank d reads its share of each global batch; the tp and pp ranks of one d read the same.
  lo.rank = context_->coords().dp;
  lo.world = layout().dp;
  if (!leader()) lo.log = [](const std::string&) {};
  train_loader_ = ch05::make_loader(options_.loader, expand_shard_pattern(train), lo, device());
  if (!val.empty()) {
    lo.shuffle = false;
    // Evaluation reads from batch 0 within one epoch, and a fallback was reported by the training loader.
    lo.log = [](const std::string&) {};
    val_loader_ = ch05::make_loader(options_.loader, expand_shard_pattern(val), lo, device());
  }
}

// The mean loss over the first --val-batches global batches of the validation split: each data-parallel rank
// evaluates its share of them, and the ranks average.
double Trainer::evaluate(const std::function<bool()>& stop) {
  if (!val_loader_) return NAN;
  const int64_t available = val_loader_->plan().batches_per_epoch();
  const int64_t n = options_.val_batches > 0 ? std::min(options_.val_batches, available) : available;
  val_loader_->seek(0);
  double total = 0;
  Tensor x, y;
  ch08::pp::StageLink link(context_->pp());  // with one stage, the model's own loss
  for (int64_t i = 0; i < n; ++i) {
    // A stop request ends an evaluation between two batches (all ranks agree on it): the whole split of a
    // large validation set can take minutes.
    if (stop && stop()) return NAN;
    val_loader_->next(x, y);
    total += ch08::pp::pipeline_loss(
        *run_.model, link, {x.device() == device() ? x : x.to(device()), y.device() == device() ? y : y.to(device())});
  }
  return dist::mean_over(context_->dp(), total / static_cast<double>(n), device());
}

std::string Trainer::sample_text(int64_t step) {
  if (options_.sample_tokens <= 0) return "";
  if (!tokenizer_) tokenizer_ = std::make_unique<GPT2Tokenizer>(GPT2Tokenizer::load_default());
  SampleOptions so;
  so.max_new_tokens = options_.sample_tokens;
  // A tensor- or pipeline-parallel run samples on rank 0 from the whole model, gathered from the shards.
  const GPT2* sampled = run_.model.get();
  std::unique_ptr<GPT2> whole;
  if (!run_.model->shard().whole(run_.model->config())) {
    whole = ch08::tp::gather_whole_model(*run_.model, *context_, device());
    if (!whole) return "";
    sampled = whole.get();
  }
  const std::vector<int32_t> ids = sample_tokens(*sampled, {GPT2Tokenizer::kEndOfText}, so, sample_rng_);
  std::string text;
  for (int32_t id : ids) text += sampled_text(*tokenizer_, id);
  if (leader())
    std::printf("---- sample at step %lld ----\n%s\n------------------------------\n", static_cast<long long>(step),
                text.c_str());
  Json rec = Json::object();
  rec.set("step", step);
  rec.set("sample", text);
  log_->write(rec);
  return text;
}

// Every rank calls it: the ranks gather the whole model's tensors to rank 0, which writes (data-parallel
// replicas are identical), while the others wait, so that no rank moves on, or exits, before the checkpoint is
// complete.
void Trainer::save_checkpoint_at(int64_t step) {
  TrainState s;
  s.step = step;
  s.loader_position = train_loader_->position();
  s.rng = sample_rng_.state();
  s.config = run_.model->config();
  s.options = options_.to_json();
  s.parallel = layout();
  if (run_.step->loss_scaler()) s.loss_scaler = run_.step->loss_scaler()->state();
  // ZeRO: every rank's shard of the optimizer state, gathered whole (the checkpoint holds the whole model's).
  const std::unique_ptr<AdamW> gathered = whole_optimizer_for_checkpoint(*context_, *run_.optimizer, *run_.model);
  with_whole_model(*run_.step, [&] {  // ZeRO-3: the parameters gathered from the shards meanwhile
    save_checkpoint(options_.save, *run_.model, gathered ? *gathered : *run_.optimizer, s, context_.get());
  });
  if (leader()) std::printf("checkpoint: step %lld saved to %s\n", static_cast<long long>(step), options_.save.c_str());
  world_->barrier();
}

void Trainer::log_step(int64_t step, const TrainStepResult& r) {
  const double tokens = static_cast<double>(options_.batch * options_.seq * accum_steps() * layout().dp);
  const double tok_per_s = tokens / r.seconds;
  run_seconds_ += r.seconds;
  const int64_t done = step + 1 - start_step_;
  const double eta = run_seconds_ / static_cast<double>(done) * static_cast<double>(options_.steps - step - 1);
  const MemoryStats memory = memory_stats(device());  // peaks over this step: run() resets them before each
  const int64_t peak = memory.peak_total;
  std::optional<double> mfu;
  if (peak_flops_) mfu = flops_per_token_ * tok_per_s / *peak_flops_;
  // A pipeline's bubble, measured in this step, next to the ideal (P-1)/(M+P-1).
  const auto* pipeline = dynamic_cast<const ch08::pp::PipelineStep*>(run_.step.get());
  // fp16: the scale the step used, and whether an overflow skipped it.
  const std::string loss_scaling =
      r.loss_scale > 0 ? cat(" | scale ", r.loss_scale, r.skipped ? " | overflow: step skipped" : "") : "";
  if (!leader()) return;
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %7.1f ms | %8.0f tok/s%s%s%s | ETA %s\n",
              static_cast<long long>(step + 1), static_cast<long long>(options_.steps), r.loss, r.lr, r.grad_norm,
              r.seconds * 1e3, tok_per_s, mfu ? cat(" | MFU ", static_cast<int>(*mfu * 1000) / 10.0, "%").c_str() : "",
              pipeline ? cat(" | bubble ",
                             pipeline->last_stats().bubble_measured
                                 ? cat(static_cast<int>(pipeline->last_stats().bubble * 1000) / 10.0, "%")
                                 : std::string("not timed in a graph"),
                             " (ideal ", static_cast<int>(pipeline->last_stats().ideal_bubble * 1000) / 10.0, "%)")
                             .c_str()
                       : "",
              loss_scaling.c_str(), format_duration(eta).c_str());
  if (options_.memory_report && step == start_step_) {
    // The theory of this rank, the one that prints: its shard and its stage's micro-batches under --tp and --pp.
    const comm::ParallelCoords& rank = context_->coords();
    const ch07::MemoryTheory theory = run_memory_theory(run_config_, options_.batch, options_.seq, rank);
    std::printf("memory of step %lld on %s (theory: %s, every rung's share):\n%s", static_cast<long long>(step + 1),
                device().str().c_str(), run_memory_theory_scope(run_config_, rank).c_str(),
                ch07::memory_report(memory, theory, device().is_cpu() ? ch07::process_memory() : ch07::ProcessMemory{})
                    .c_str());
  }
  std::fflush(stdout);
  Json rec = Json::object();
  rec.set("step", step + 1);
  rec.set("loss", r.loss);
  rec.set("lr", r.lr);
  rec.set("grad_norm", r.grad_norm);
  rec.set("ms", r.seconds * 1e3);
  rec.set("data_ms", r.data_seconds * 1e3);
  rec.set("tokens_per_s", tok_per_s);
  rec.set("mfu", mfu ? Json(*mfu) : Json());
  rec.set("mem_peak_bytes", peak);
  if (r.loss_scale > 0) {
    rec.set("loss_scale", r.loss_scale);
    rec.set("skipped", r.skipped);
    rec.set("skipped_steps", run_.step->loss_scaler()->state().skipped_steps);
  }
  rec.set("mem_peak_by_category", ch07::peak_by_category_json(memory));
  if (pipeline) {
    if (pipeline->last_stats().bubble_measured) rec.set("bubble", pipeline->last_stats().bubble);
    rec.set("bubble_ideal", pipeline->last_stats().ideal_bubble);
  }
  log_->write(rec);
}

Json Trainer::log_header() const {
  Json header = Json::object();
  header.set("log", "gpt2_train");
  header.set("date", bench::iso8601_utc_now());
  header.set("command", options_.command);
  header.set("parallel", layout().str());
  header.set("machine", bench::describe_machine().to_json());
  return header;
}

TrainSummary Trainer::run(const std::function<int()>& stop_signal) {
  TrainSummary summary;
  summary.steps = start_step_;
  if (options_.find_max_batch) {
    // Each rank would measure its own peak and could choose another micro-batch than its peers: one process only.
    LAB_CHECK(world_->size() == 1, InvalidArgument, "--find-max-batch measures one process (run it without mpirun)");
    const int64_t budget = ch07::parse_byte_size(options_.memory_budget);
    const ch07::MaxBatchSearch found = ch07::find_max_batch(*run_.step, options_.seq, budget, int64_t{1} << 16);
    if (leader())
      std::printf("--find-max-batch: seq %lld, %lld micro-batch(es) per step, --recompute %s, on %s:\n%s",
                  static_cast<long long>(options_.seq), static_cast<long long>(accum_steps()),
                  options_.recompute.c_str(), device().str().c_str(), found.str(budget).c_str());
    return summary;
  }
  log_->write(log_header());
  auto stop = [&] {
    summary.stop_signal = dist::agree_on_stop(*world_, stop_signal ? stop_signal() : 0);
    return summary.stop_signal != 0;
  };
  auto eval_and_log = [&](int64_t step) {
    if (!val_loader_) return;
    bench::Timer t;
    const double val_loss = evaluate(stop);
    if (summary.stop_signal != 0) {
      if (leader())
        std::printf("eval  %5lld | stopped by a signal after %.1f s\n", static_cast<long long>(step), t.seconds());
      return;
    }
    summary.last_val_loss = val_loss;
    if (leader())
      std::printf("eval  %5lld | val_loss %.4f | %.1f s\n", static_cast<long long>(step), summary.last_val_loss,
                  t.seconds());
    Json rec = Json::object();
    rec.set("step", step);
    rec.set("val_loss", summary.last_val_loss);
    rec.set("ms", t.milliseconds());
    log_->write(rec);
  };
  auto save = [&](int64_t step) {
    save_checkpoint_at(step);
    summary.checkpoint_step = step;
  };
  if (start_step_ == 0 && options_.eval_every > 0 && !stop()) eval_and_log(0);
  // Each step's memory peaks are its own (the allocator's peak is reset before every step), and the first step
  // is the one --memory-snapshot records.
  ch07::MemorySnapshot snapshot(device());
  if (!options_.memory_snapshot.empty())
    snapshot.start();
  else
    allocator_for(device()).reset_peak();
  TrainingLoop loop([this](const BatchSource& next_batch, double lr) { return run_.run(next_batch, lr); },
                    [this] {
                      train_loader_->next(inputs_, targets_);
                      return MicroBatch{inputs_, targets_};
                    },
                    schedule_);
  // --profile N: the profile opens after everything step N - 1 did and closes right after step N.
  std::optional<StepProfile> profile;
  const auto profile_from = [&](int64_t next_step) {
    if (options_.profile == next_step + 1) profile.emplace();
  };
  profile_from(start_step_);
  // --memory-report: what the allocator holds after the first step, to say at the end whether later steps grew it.
  std::optional<MemoryStats> after_first_step;
  const auto after_step = [&](int64_t step, const TrainStepResult& r) {
    if (options_.memory_report && step == start_step_) after_first_step = memory_stats(device());
    if (profile) {
      profile->close();
      if (leader()) print_profile(*profile, step + 1);
      profile.reset();
    }
    if (step == start_step_ && !options_.memory_snapshot.empty()) {
      snapshot.stop();
      if (leader()) snapshot.write(options_.memory_snapshot);
    }
    log_step(step, r);
    if (step == start_step_ && leader())  // --attention flash-tuned timed its kernel sets in the first step
      for (const std::string& line : ops::flash_tile_choices()) std::printf("flash-tuned: %s\n", line.c_str());
    summary.last_loss = r.loss;
    summary.steps = step + 1;
    const bool last = step + 1 == options_.steps;
    if ((options_.eval_every > 0 && (step + 1) % options_.eval_every == 0) || last) eval_and_log(step + 1);
    if (options_.sample_every > 0 && (step + 1) % options_.sample_every == 0 && !last && summary.stop_signal == 0)
      sample_text(step + 1);
    if (!options_.save.empty() && ((options_.save_every > 0 && (step + 1) % options_.save_every == 0) || last))
      save(step + 1);
    allocator_for(device()).reset_peak();
    profile_from(step + 1);
  };
  // A stop during the last step's evaluation ends the run as interrupted too (no sample follows).
  summary.interrupted = loop.run(start_step_, options_.steps, after_step, stop).interrupted || summary.stop_signal != 0;
  summary.seconds = run_seconds_;
  if (after_first_step && summary.steps > start_step_ + 1 && leader()) {
    // A caching allocator reaches its steady state in the first step: later steps reuse its blocks. Growth after it
    // (an evaluation's or a sample's shapes, or fragmentation) is reserved memory the first step's report missed.
    const MemoryStats now = memory_stats(device());
    std::printf(
        "allocator after step %lld: reserved %.1f MiB (%.1f MiB after step %lld), %lld cudaMalloc calls since\n",
        static_cast<long long>(summary.steps), static_cast<double>(now.reserved) / (1 << 20),
        static_cast<double>(after_first_step->reserved) / (1 << 20), static_cast<long long>(start_step_ + 1),
        static_cast<long long>(now.system_allocs - after_first_step->system_allocs));
  }
  if (summary.interrupted) {
    // The steps done since the last checkpoint are kept, unless there are none.
    if (!options_.save.empty() && summary.steps > start_step_ && summary.checkpoint_step != summary.steps)
      save(summary.steps);
    return summary;
  }
  summary.sample = sample_text(summary.steps);
  return summary;
}

}  // namespace lab
