#include "ch10_gpt2/trainer.h"

#include <cstdio>

#include "ch05_data/loaders/make_loader.h"
#include "ch05_data/tokenize/prepare.h"
#include "ch10_gpt2/sampler.h"
#include "common/bench/gpu_peaks.h"
#include "common/bench/machine.h"
#include "common/bench/result.h"
#include "common/bench/timer.h"
#include "common/core/parallel.h"
#include "common/io/files.h"
#include "common/nn/gpt2_weights.h"
#include "common/ops/reduce.h"
#include "common/train/training_loop.h"

namespace lab {

namespace {

// The settings that must not change between a run and its resumption (they define the batches and the
// optimizer trajectory); the rest (steps, logging, evaluation, device) may.
constexpr const char* kResumeInvariants[] = {"batch", "seq", "total_batch_tokens", "shuffle", "seed", "data_train"};

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

}  // namespace

Trainer::Trainer(TrainOptions options) : options_(std::move(options)) {
  if (options_.threads > 0) set_num_threads(static_cast<int>(options_.threads));
  device_ = options_.device == "auto" ? best_device() : parse_device(options_.device);
  math_mode_ = parse_math_mode(options_.dtype);
  LAB_CHECK(!device_.is_cuda() || cuda_available(), Unsupported, "--device ", options_.device,
            ": no CUDA GPU is available", (cuda_available() ? "" : " (or this build has no CUDA backend)"));
  apply_math_mode(device_, math_mode_);

  // The outputs first: a destination that cannot be written, or that holds a user's files, stops the run
  // before any data is read or any model is built.
  if (!options_.save.empty())
    for (const std::string& note : for_flag("--save", [&] { return prepare_checkpoint_destination(options_.save); }))
      std::printf("--save: %s\n", note.c_str());
  log_ = for_flag("--log-json", [&] { return std::make_unique<JsonLog>(options_.log_json, !options_.resume.empty()); });

  const int64_t micro_tokens = options_.batch * options_.seq;
  accum_steps_ = options_.total_batch_tokens > 0 ? options_.total_batch_tokens / micro_tokens : 1;

  const TrainState resumed = read_resume_state();
  start_step_ = resumed.step;
  const GPT2Config config = model_config(resumed);
  setup_data();
  model_ = std::make_unique<GPT2>(config, device_);
  LAB_CHECK(options_.seq <= model_->config().block_size, InvalidArgument, "--seq ", options_.seq,
            " exceeds the model's block size ", model_->config().block_size);
  optimizer_ = std::make_unique<AdamW>(
      model_->parameters(), AdamWConfig{static_cast<float>(options_.beta1), static_cast<float>(options_.beta2), 1e-8f,
                                        static_cast<float>(options_.weight_decay)});
  step_ = std::make_unique<TrainStep>(*model_, *optimizer_, TrainStepConfig{accum_steps_, options_.grad_clip, false});
  sample_rng_.reseed(static_cast<uint64_t>(options_.seed) ^ 0x5a5a5a5aull);
  if (!options_.resume.empty()) {
    load_checkpoint(options_.resume, *model_, *optimizer_);
    train_loader_->seek(resumed.loader_position);
    sample_rng_.set_state(resumed.rng);
  } else if (!options_.init.empty()) {
    load_gpt2_weights(*model_, options_.init);
  } else {
    model_->init_weights(static_cast<uint64_t>(options_.seed));
  }

  schedule_.kind = LrSchedule::parse_kind(options_.lr_schedule);
  schedule_.max_lr = options_.lr;
  schedule_.warmup_steps = options_.warmup_steps;
  schedule_.total_steps = options_.lr_decay_steps > 0 ? options_.lr_decay_steps : options_.steps;
  schedule_.min_lr_fraction = options_.lr_min_fraction;

  flops_per_token_ = gpt2_flops_per_token(model_->config(), options_.seq);
  if (device_.is_cuda()) {
    const auto peak = bench::gpu_peak_flops(device_name(device_), math_mode_);
    if (peak) {
      peak_flops_ = peak->flops;
      peak_name_ = peak->entry;
    }
  }
  std::printf("model: %s, %.1fM parameters, on %s (%s)\n", model_->config().str().c_str(),
              static_cast<double>(model_->config().num_parameters()) / 1e6, device_.str().c_str(),
              device_name(device_).c_str());
  std::printf("batch: %lld x %lld tokens, %lld micro-batch(es) per step, %lld steps, %s loader, %d CPU threads\n",
              static_cast<long long>(options_.batch), static_cast<long long>(options_.seq),
              static_cast<long long>(accum_steps_), static_cast<long long>(options_.steps),
              train_loader_->name().c_str(), num_threads());
  if (device_.is_cuda())
    std::printf("MFU peak: %s\n",
                peak_flops_ ? cat(peak_name_, " ", options_.dtype, " ", *peak_flops_ / 1e12, " TFLOP/s").c_str()
                            : "unknown GPU: peak not known, MFU not reported");
  if (!val_loader_)
    std::printf("validation: none (--data-train without --data-val), so no validation loss is computed\n");
  if (start_step_ > 0)
    std::printf("resumed from %s at step %lld\n", options_.resume.c_str(), static_cast<long long>(start_step_));
  std::fflush(stdout);
}

Trainer::~Trainer() = default;

TrainState Trainer::read_resume_state() const {
  if (options_.resume.empty()) return {};
  const TrainState resumed = for_flag("--resume", [&] { return read_checkpoint_state(options_.resume); });
  for (const char* key : kResumeInvariants) {
    const Json* saved = resumed.options.find(key);
    LAB_CHECK(saved && saved->dump() == options_.to_json().at(key).dump(), InvalidArgument, "--resume: '", key,
              "' was ", (saved ? saved->dump() : "absent"), " in ", options_.resume, ", now ",
              options_.to_json().at(key).dump());
  }
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
  train_loader_ = ch05::make_loader(options_.loader, expand_shard_pattern(train), lo, device_);
  if (!val.empty()) {
    lo.shuffle = false;
    // Evaluation reads from batch 0 within one epoch, and a fallback was reported by the training loader.
    lo.log = [](const std::string&) {};
    val_loader_ = ch05::make_loader(options_.loader, expand_shard_pattern(val), lo, device_);
  }
}

double Trainer::evaluate() {
  if (!val_loader_) return NAN;
  const int64_t available = val_loader_->plan().batches_per_epoch();
  const int64_t n = options_.val_batches > 0 ? std::min(options_.val_batches, available) : available;
  val_loader_->seek(0);
  double total = 0;
  Tensor x, y;
  for (int64_t i = 0; i < n; ++i) {
    val_loader_->next(x, y);
    Tape tape(false);
    const Tensor losses =
        model_->loss(tape, x.device() == device_ ? x : x.to(device_), y.device() == device_ ? y : y.to(device_));
    total += ops::sum(losses) / static_cast<double>(losses.numel());
  }
  return total / static_cast<double>(n);
}

std::string Trainer::sample_text(int64_t step) {
  if (options_.sample_tokens <= 0) return "";
  if (!tokenizer_) tokenizer_ = std::make_unique<GPT2Tokenizer>(GPT2Tokenizer::load_default());
  SampleOptions so;
  so.max_new_tokens = options_.sample_tokens;
  const std::vector<int32_t> ids = sample_tokens(*model_, {GPT2Tokenizer::kEndOfText}, so, sample_rng_);
  std::string text;
  // End-of-text separates documents (here: paragraphs); show it as a paragraph break and keep going.
  for (int32_t id : ids) text += id == GPT2Tokenizer::kEndOfText ? std::string("\n\n") : tokenizer_->token_bytes(id);
  std::printf("---- sample at step %lld ----\n%s\n------------------------------\n", static_cast<long long>(step),
              text.c_str());
  Json rec = Json::object();
  rec.set("step", step);
  rec.set("sample", text);
  log_->write(rec);
  return text;
}

void Trainer::save_checkpoint_at(int64_t step) {
  TrainState s;
  s.step = step;
  s.loader_position = train_loader_->position();
  s.rng = sample_rng_.state();
  s.config = model_->config();
  s.options = options_.to_json();
  save_checkpoint(options_.save, *model_, *optimizer_, s);
  std::printf("checkpoint: step %lld saved to %s\n", static_cast<long long>(step), options_.save.c_str());
}

void Trainer::log_step(int64_t step, const TrainStepResult& r) {
  const double tokens = static_cast<double>(options_.batch * options_.seq * accum_steps_);
  const double tok_per_s = tokens / r.seconds;
  run_seconds_ += r.seconds;
  const int64_t done = step + 1 - start_step_;
  const double eta = run_seconds_ / static_cast<double>(done) * static_cast<double>(options_.steps - step - 1);
  const int64_t peak = memory_stats(device_).peak_total;
  std::optional<double> mfu;
  if (peak_flops_) mfu = flops_per_token_ * tok_per_s / *peak_flops_;
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %7.1f ms | %8.0f tok/s%s | ETA %s\n",
              static_cast<long long>(step + 1), static_cast<long long>(options_.steps), r.loss, r.lr, r.grad_norm,
              r.seconds * 1e3, tok_per_s, mfu ? cat(" | MFU ", static_cast<int>(*mfu * 1000) / 10.0, "%").c_str() : "",
              format_duration(eta).c_str());
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
  log_->write(rec);
}

Json Trainer::log_header() const {
  Json header = Json::object();
  header.set("log", "gpt2_train");
  header.set("date", bench::iso8601_utc_now());
  header.set("command", options_.command);
  header.set("machine", bench::describe_machine().to_json());
  return header;
}

TrainSummary Trainer::run(const std::function<bool()>& stop_requested) {
  TrainSummary summary;
  summary.steps = start_step_;
  log_->write(log_header());
  auto eval_and_log = [&](int64_t step) {
    if (!val_loader_) return;
    bench::Timer t;
    summary.last_val_loss = evaluate();
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
  auto stop = [&] { return stop_requested && stop_requested(); };
  if (start_step_ == 0 && options_.eval_every > 0 && !stop()) eval_and_log(0);
  TrainingLoop loop(
      *step_,
      [this] {
        train_loader_->next(inputs_, targets_);
        return MicroBatch{inputs_, targets_};
      },
      schedule_);
  const auto after_step = [&](int64_t step, const TrainStepResult& r) {
    log_step(step, r);
    summary.last_loss = r.loss;
    summary.steps = step + 1;
    const bool last = step + 1 == options_.steps;
    if ((options_.eval_every > 0 && (step + 1) % options_.eval_every == 0) || last) eval_and_log(step + 1);
    if (options_.sample_every > 0 && (step + 1) % options_.sample_every == 0 && !last) sample_text(step + 1);
    if (!options_.save.empty() && ((options_.save_every > 0 && (step + 1) % options_.save_every == 0) || last))
      save(step + 1);
  };
  summary.interrupted = loop.run(start_step_, options_.steps, after_step, stop).interrupted;
  summary.seconds = run_seconds_;
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
