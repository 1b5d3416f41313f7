// The ZeRO staircase: its rungs, each measured through the trainer's builder, and the theory they are read
// against (see zero_staircase.h).
#include "ch07_memory/bench/zero_staircase.h"

#include <cstdio>

#include "ch10_gpt2/run_settings.h"
#include "common/core/error.h"

namespace lab::ch07 {

staircase::Staircase zero_staircase(const ZeroBenchConfig& config, int ranks) {
  const MemoryBenchConfig& c = config.memory;
  LAB_CHECK(c.micro_batches >= 1 && c.batch % c.micro_batches == 0, InvalidArgument, "--batch ", c.batch,
            " is not a multiple of --micro-batches ", c.micro_batches);
  const int64_t micro_rows = c.batch / c.micro_batches;
  LAB_CHECK(c.batch % (micro_rows * ranks) == 0, InvalidArgument, "ZeRO staircase: --batch ", c.batch,
            " does not split into micro-batches of ", micro_rows, " rows over ", ranks,
            " ranks (make --micro-batches a multiple of the ranks)");
  char bucket_mb[32];
  std::snprintf(bucket_mb, sizeof bucket_mb, "%g", config.bucket_mb);
  return {"zero",
          cat("GPT-2 ", c.model, ", ", c.batch, " x ", c.seq, " tokens per step over ", ranks, " ranks (",
              c.batch / ranks, " rows each, micro-batches of ", micro_rows, "), fp32, AdamW, buckets of ", bucket_mb,
              " MiB, on ", c.device.str()),
          {"--model", c.model, "--seq", std::to_string(c.seq), "--total-batch-tokens", std::to_string(c.batch * c.seq),
           "--batch", std::to_string(micro_rows), "--dp", std::to_string(ranks), "--dp-stage", "bucketed",
           "--bucket-mb", bucket_mb},
          {
              {"dp", "data parallelism: every rank holds all parameters, gradients and moments", {"--zero", "0"}},
              {"zero1",
               "AdamW's moments sharded: each rank updates its shard, then the parameters are all-gathered",
               {"--zero", "1"}},
              {"zero2", "gradients sharded too: each bucket reduce-scattered into its owner's shard", {"--zero", "2"}},
              {"zero3", "parameters sharded too: each layer's gathered for its forward and backward", {"--zero", "3"}},
              {"zero3-prefetch",
               "the next layer's gather overlapped with the current layer, on a second communicator",
               {"--zero", "3", "--zero-prefetch"}},
          }};
}

ZeroStaircaseReport run_zero_staircase(comm::Communicator& group, const ZeroBenchConfig& config,
                                       const std::function<void(const staircase::RungReport&)>& on_rung) {
  const staircase::Staircase stairs = zero_staircase(config, group.size());
  ZeroStaircaseReport out;
  out.report = staircase::run_staircase(
      stairs,
      [&](const staircase::Rung& rung) {
        // The rung's run as gpt2_train --dp D --zero S builds it (ch10_gpt2/run_settings.h), each rank training
        // its own rows of the global step.
        const staircase::Settings settings = staircase::parse_settings(stairs.flags_for(rung));
        LAB_CHECK(int_setting(settings, "dp") == group.size(), InvalidArgument, "ZeRO staircase: --dp ",
                  int_setting(settings, "dp"), " on a group of ", group.size(), " ranks");
        const RunConfig run = run_config_from_settings(settings, config.memory.device, config.model_config);
        const comm::ParallelContext context(group, run.parallel.layout);
        std::vector<staircase::Measurement> measured = measure_training_rung(
            run, int_setting(settings, "batch"), config.memory.seq, context, config.memory.steps,
            [&](const TrainingRun& built) { out.parameters = built.model->parameters().numel(); });
        staircase::Measurement state{"state_MiB", "MiB", bench::Better::Lower, {}};
        for (size_t s = 0; s < static_cast<size_t>(config.memory.steps); ++s) {
          double sum = 0;
          for (const staircase::Measurement& m : measured)
            if (m.name == "params_MiB" || m.name == "grads_MiB" || m.name == "optimizer_MiB") sum += m.samples[s];
          state.samples.push_back(sum);
        }
        measured.insert(measured.begin(), std::move(state));
        return measured;
      },
      on_rung);
  for (const staircase::Rung& rung : stairs.rungs) {
    const RunConfig run = run_config_from_settings(staircase::parse_settings(stairs.flags_for(rung)),
                                                   config.memory.device, config.model_config);
    const ZeroSetting setting{run.memory.zero, run.parallel.layout.dp, run.parallel.bucket_bytes,
                              run.memory.zero_prefetch};
    out.theory.push_back(zero_state_theory(run.model, out.parameters, setting));
  }
  return out;
}

}  // namespace lab::ch07
