// The rungs of the memory staircase and their measurement (see memory_staircase.h).
#include "ch07_memory/memory_staircase.h"

#include "ch07_memory/gradient_accumulation.h"
#include "ch07_memory/recompute.h"
#include "common/core/error.h"
#include "common/util/rng.h"

namespace lab::ch07 {

namespace {

std::string setting(const staircase::Settings& s, const std::string& name, const std::string& absent) {
  const auto it = s.find(name);
  return it == s.end() ? absent : it->second;
}

int64_t int_setting(const staircase::Settings& s, const std::string& name) {
  const std::string v = setting(s, name, "");
  LAB_CHECK(!v.empty(), InvalidArgument, "memory staircase: rung without --", name);
  return std::stoll(v);
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

}  // namespace

staircase::Staircase memory_staircase(const MemoryBenchConfig& c) {
  const std::string rows = std::to_string(c.batch), micro_rows = std::to_string(c.batch / c.micro_batches);
  LAB_CHECK(c.micro_batches >= 1 && c.batch % c.micro_batches == 0, InvalidArgument, "--batch ", c.batch,
            " is not a multiple of --micro-batches ", c.micro_batches);
  return {"memory",
          cat("GPT-2 ", c.model, ", ", c.batch, " x ", c.seq, " tokens per step, fp32, AdamW, on ", c.device.str()),
          {"--model", c.model, "--seq", std::to_string(c.seq), "--total-batch-tokens", std::to_string(c.batch * c.seq)},
          {
              {"original", "one batch, every activation kept", {"--batch", rows}},
              {"accumulation",
               cat(c.micro_batches, " micro-batches of ", micro_rows, " rows, gradients accumulated"),
               {"--batch", micro_rows}},
              {"selective",
               "attention probabilities and GELU recomputed in backward",
               {"--batch", micro_rows, "--recompute", "selective"}},
              {"block",
               "only each block's input kept; the block re-run in backward",
               {"--batch", micro_rows, "--recompute", "block"}},
          }};
}

std::unique_ptr<TrainStep> make_rung_step(const staircase::Settings& settings, GPT2& model, AdamW& optimizer) {
  const int64_t micro = micro_batches_per_step(int_setting(settings, "total-batch-tokens"),
                                               int_setting(settings, "batch"), int_setting(settings, "seq"));
  return std::make_unique<TrainStep>(model, optimizer, TrainStepConfig{micro, 1.0, false});
}

std::vector<staircase::Measurement> measure_rung(const staircase::Settings& settings, const MemoryBenchConfig& config) {
  ModelOptions options;
  apply_recompute(options, parse_recompute_policy(setting(settings, "recompute", "none")));
  const GPT2Config model_config = GPT2Config::from_name(setting(settings, "model", "d12"));
  const int64_t rows = int_setting(settings, "batch"), seq = int_setting(settings, "seq");
  std::vector<staircase::Measurement> out;
  {
    GPT2 model(model_config, config.device, options);
    model.init_weights(1);
    AdamW optimizer(model.parameters(), {});
    const std::unique_ptr<TrainStep> step = make_rung_step(settings, model, optimizer);
    // The same tokens for every rung: the step's rows, handed out micro-batch by micro-batch.
    const int64_t step_rows = rows * step->config().accum_steps;
    Rng rng(5);
    std::vector<int32_t> tokens(static_cast<size_t>(step_rows * seq)), targets(tokens.size());
    for (auto& t : tokens) t = static_cast<int32_t>(rng.below(model_config.vocab_size));
    for (auto& t : targets) t = static_cast<int32_t>(rng.below(model_config.vocab_size));
    const Tensor all_tokens = Tensor::from_ints(tokens, {step_rows, seq}, config.device);
    const Tensor all_targets = Tensor::from_ints(targets, {step_rows, seq}, config.device);
    int64_t next = 0;
    const BatchSource source = [&] {
      const int64_t first = (next++ % step->config().accum_steps) * rows;
      return MicroBatch{all_tokens.slice_rows(first, first + rows), all_targets.slice_rows(first, first + rows)};
    };
    step->run(source, 1e-4);  // untimed: first-touch page faults, caches filled
    staircase::Measurement ms{"step_ms", "ms", bench::Better::Lower, {}};
    staircase::Measurement total{"peak_MiB", "MiB", bench::Better::Lower, {}};
    std::vector<staircase::Measurement> by_category;
    for (int i = 0; i < kNumMemCategories; ++i)
      by_category.push_back(
          {cat(mem_category_name(static_cast<MemCategory>(i)), "_MiB"), "MiB", bench::Better::Lower, {}});
    for (int64_t s = 0; s < config.steps; ++s) {
      allocator_for(config.device).reset_peak();
      const TrainStepResult r = step->run(source, 1e-4);
      const MemoryStats stats = memory_stats(config.device);
      ms.samples.push_back(r.seconds * 1e3);
      total.samples.push_back(mib(stats.peak_total));
      for (int i = 0; i < kNumMemCategories; ++i)
        by_category[static_cast<size_t>(i)].samples.push_back(mib(stats.peak[i]));
    }
    out.push_back(std::move(total));
    for (auto& m : by_category) out.push_back(std::move(m));
    out.push_back(std::move(ms));
  }
  return out;
}

}  // namespace lab::ch07
