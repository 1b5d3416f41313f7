// A rung's settings as a RunConfig, and one rung measured through build_run (see run_settings.h).
#include "ch10_gpt2/run_settings.h"

#include "ch07_memory/gradient_accumulation.h"
#include "ch07_memory/memory_staircase.h"
#include "common/comm/single_process.h"

namespace lab {

RunConfig run_config_from_settings(const staircase::Settings& s, Device device) {
  using ch07::int_setting;
  using ch07::setting_or;
  const auto flag = [&](const std::string& name) { return setting_or(s, name, "false") == "true"; };
  RunConfig c;
  const std::string model = setting_or(s, "model", "");
  LAB_CHECK(!model.empty(), InvalidArgument, "staircase: rung without --model");
  c.model = GPT2Config::from_name(model);
  c.device = device;
  c.math = parse_math_mode(setting_or(s, "dtype", "fp32"));
  c.rungs = ModelRungs::parse(setting_or(s, "kernels", "reference"), setting_or(s, "attention", "materialized"),
                              setting_or(s, "recompute", "none"), setting_or(s, "activations", "fp32"));
  const std::string offload = setting_or(s, "offload", "none");
  LAB_CHECK(offload == "none" || offload == "optimizer", InvalidArgument, "--offload: '", offload,
            "' is not one of none|optimizer");
  c.memory = {flag("optimizer-in-backward"), offload == "optimizer",
              static_cast<int>(std::stoll(setting_or(s, "zero", "0"))), flag("zero-prefetch")};
  c.step.accum_steps = ch07::micro_batches_per_step(std::stoll(setting_or(s, "total-batch-tokens", "0")),
                                                    int_setting(s, "batch"), int_setting(s, "seq"));
  c.step.grad_clip = std::stod(setting_or(s, "grad-clip", "1.0"));
  c.cuda_graphs = flag("cuda-graphs");
  return c;
}

std::vector<staircase::Measurement> measure_training_rung(const staircase::Settings& settings, Device device,
                                                          int64_t steps) {
  const RunConfig config = run_config_from_settings(settings, device);
  LAB_CHECK(!config.cuda_graphs, InvalidArgument,
            "staircase: a rung with --cuda-graphs is measured by gpt2_step_bench (its replays are not steps to "
            "measure one by one here)");
  TrainingRun run = build_run(config);
  const int64_t rows = ch07::int_setting(settings, "batch"), seq = ch07::int_setting(settings, "seq");
  const MicroBatch step_rows =
      ch07::random_step_batch(config.model.vocab_size, rows * config.step.accum_steps, seq, device);
  comm::SingleProcessCommunicator alone;
  return ch07::measure_steps(*run.step, ch07::micro_batches_of(step_rows, rows), device, steps, alone);
}

}  // namespace lab
