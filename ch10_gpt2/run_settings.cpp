// A rung's settings as a RunConfig, and one rung measured through build_run (see run_settings.h).
#include "ch10_gpt2/run_settings.h"

#include "ch07_memory/gradient_accumulation.h"
#include "ch07_memory/memory_staircase.h"
#include "common/comm/single_process.h"

namespace lab {

int64_t micro_batches_per_rank_step(int64_t total_batch_tokens, int64_t batch, int64_t seq,
                                    const ch08::ParallelOptions& parallel) {
  const int64_t micro_per_step =
      ch07::micro_batches_per_step(total_batch_tokens, batch, seq, parallel.layout.dp);  // the accumulation rung's
  if (parallel.layout.pp == 1) return micro_per_step;
  LAB_CHECK(total_batch_tokens == 0 || micro_per_step == parallel.micro_batches, InvalidArgument,
            "--total-batch-tokens ", total_batch_tokens, " is ", micro_per_step,
            " micro-batches per step, but --micro-batches is ", parallel.micro_batches, " (give one of the two)");
  return parallel.micro_batches;
}

RunConfig run_config_from_settings(const staircase::Settings& s, Device device,
                                   const std::optional<GPT2Config>& model) {
  using ch07::int_setting;
  using ch07::setting_or;
  const auto flag = [&](const std::string& name) { return setting_or(s, name, "false") == "true"; };
  const auto count = [&](const std::string& name) {
    return s.count(name) ? static_cast<int>(int_setting(s, name)) : 1;
  };
  RunConfig c;
  const std::string name = setting_or(s, "model", "");
  LAB_CHECK(model || !name.empty(), InvalidArgument, "staircase: rung without --model");
  c.model = model ? *model : GPT2Config::from_name(name);
  c.device = device;
  c.math = parse_math_mode(setting_or(s, "dtype", "fp32"));
  c.rungs = ModelRungs::parse(setting_or(s, "kernels", "reference"), setting_or(s, "attention", "materialized"),
                              setting_or(s, "recompute", "none"), setting_or(s, "activations", "fp32"),
                              setting_or(s, "lm-head", "full"), std::stoll(setting_or(s, "lm-head-rows", "0")));
  const std::string offload = setting_or(s, "offload", "none");
  LAB_CHECK(offload == "none" || offload == "optimizer", InvalidArgument, "--offload: '", offload,
            "' is not one of none|optimizer");
  c.memory = {flag("optimizer-in-backward"), offload == "optimizer",
              static_cast<int>(std::stoll(setting_or(s, "zero", "0"))), flag("zero-prefetch")};
  c.parallel.layout = {count("dp"), count("tp"), count("pp")};
  c.parallel.dp_stage = dist::parse_dp_stage(setting_or(s, "dp-stage", "overlap"));
  c.parallel.bucket_bytes = static_cast<int64_t>(std::stod(setting_or(s, "bucket-mb", "25")) * (1 << 20));
  c.parallel.micro_batches = count("micro-batches");
  c.parallel.pp_schedule = ch08::parse_pp_schedule(setting_or(s, "pp-schedule", "1f1b"));
  c.step.accum_steps = micro_batches_per_rank_step(std::stoll(setting_or(s, "total-batch-tokens", "0")),
                                                   int_setting(s, "batch"), int_setting(s, "seq"), c.parallel);
  c.step.grad_clip = std::stod(setting_or(s, "grad-clip", "1.0"));
  c.cuda_graphs = flag("cuda-graphs");
  return c;
}

std::vector<staircase::Measurement> measure_training_rung(const RunConfig& config, int64_t rows, int64_t seq,
                                                          const comm::ParallelContext& context, int64_t steps,
                                                          const std::function<void(const TrainingRun&)>& built) {
  LAB_CHECK(!config.cuda_graphs, InvalidArgument,
            "staircase: a rung with --cuda-graphs is measured by gpt2_step_bench (its replays are not steps to "
            "measure one by one here)");
  TrainingRun run = build_run(config, context);
  if (built) built(run);
  // The step's global batch, the same on every rank; each data-parallel rank trains its own rows of it (the
  // tensor- and pipeline-parallel ranks of one data-parallel rank the same rows).
  const int64_t rank_rows = rows * config.step.accum_steps, dp = context.layout().dp, dp_rank = context.coords().dp;
  const MicroBatch global = ch07::random_step_batch(config.model.vocab_size, rank_rows * dp, seq, config.device);
  const MicroBatch mine = dp == 1
                              ? global
                              : MicroBatch{global.inputs.slice_rows(dp_rank * rank_rows, (dp_rank + 1) * rank_rows),
                                           global.targets.slice_rows(dp_rank * rank_rows, (dp_rank + 1) * rank_rows)};
  return ch07::measure_steps(*run.step, ch07::micro_batches_of(mine, rows), config.device, steps, context.world());
}

std::vector<staircase::Measurement> measure_training_rung(const staircase::Settings& settings, Device device,
                                                          int64_t steps) {
  const RunConfig config = run_config_from_settings(settings, device);
  LAB_CHECK(config.parallel.layout.ranks() == 1, InvalidArgument, "staircase: a rung of layout ",
            config.parallel.layout.str(), " is measured on its ranks' context");
  comm::SingleProcessCommunicator alone;
  const comm::ParallelContext context(alone, config.parallel.layout);
  return measure_training_rung(config, ch07::int_setting(settings, "batch"), ch07::int_setting(settings, "seq"),
                               context, steps);
}

}  // namespace lab
