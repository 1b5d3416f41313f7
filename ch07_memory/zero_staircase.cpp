// The ZeRO staircase: its rungs, their steps and the theory they are read against (see zero_staircase.h).
#include "ch07_memory/zero_staircase.h"

#include <cmath>
#include <cstdio>

#include "ch07_memory/gradient_accumulation.h"
#include "ch07_memory/zero/shards.h"
#include "ch07_memory/zero/zero_step.h"
#include "common/core/error.h"
#include "common/dist/data_parallel_step.h"

namespace lab::ch07 {

namespace {

int64_t rung_bucket_bytes(const staircase::Settings& settings) {
  return static_cast<int64_t>(
      std::llround(std::stod(setting_or(settings, "bucket-mb", "25")) * static_cast<double>(1 << 20)));
}

// One rung's model, optimizer and step on this rank, declared in the order they are built, so that the step
// goes before the optimizer and the optimizer before the model.
struct RankTraining {
  std::unique_ptr<GPT2> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<TrainStep> step;
};

RankTraining make_rank_training(const staircase::Settings& settings, comm::Communicator& group,
                                const ZeroBenchConfig& config) {
  const int stage = static_cast<int>(int_setting(settings, "zero"));
  LAB_CHECK(int_setting(settings, "dp") == group.size(), InvalidArgument, "ZeRO staircase: --dp ",
            int_setting(settings, "dp"), " on a group of ", group.size(), " ranks");
  const int64_t micro_rows = int_setting(settings, "batch"), seq = int_setting(settings, "seq");
  // Micro-batches per rank: the global step's tokens over the ranks' micro-batches together.
  const int64_t accum =
      micro_batches_per_step(int_setting(settings, "total-batch-tokens"), micro_rows * group.size(), seq);
  const TrainStepConfig step_config{accum, std::stod(setting_or(settings, "grad-clip", "1.0")), false};
  const int64_t bucket_bytes = rung_bucket_bytes(settings);
  LAB_CHECK(setting_or(settings, "dp-stage", "bucketed") == "bucketed", InvalidArgument,
            "ZeRO staircase: the rungs use --dp-stage bucketed");

  RankTraining t;
  t.model = std::make_unique<GPT2>(
      config.model_config ? *config.model_config : GPT2Config::from_name(setting_or(settings, "model", "d12")),
      config.memory.device);
  t.model->init_weights(1);
  if (stage == 0) {
    t.optimizer = std::make_unique<AdamW>(t.model->parameters(), AdamWConfig{});
    t.step = std::make_unique<dist::DataParallelStep>(group, dist::DpStage::Bucketed, bucket_bytes, *t.model,
                                                      *t.optimizer, step_config);
  } else {
    const ZeroShards shards = zero_shards(stage, t.model->parameters(), group.size(), group.rank(), bucket_bytes);
    t.optimizer = std::make_unique<AdamW>(t.model->parameters(), AdamWConfig{}, shards.owned());
    t.step = make_zero_step(stage, group, shards, dist::DpStage::Bucketed, *t.model, *t.optimizer, step_config,
                            setting_or(settings, "zero-prefetch", "false") == "true");
  }
  return t;
}

}  // namespace

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
        const staircase::Settings settings = staircase::parse_settings(stairs.flags_for(rung));
        RankTraining t = make_rank_training(settings, group, config);
        out.parameters = t.model->parameters().numel();
        // This rank's rows of the global step, handed out micro-batch by micro-batch.
        const MemoryBenchConfig& c = config.memory;
        const int64_t rank_rows = c.batch / group.size();
        const MicroBatch global = random_step_batch(t.model->config().vocab_size, c.batch, c.seq, c.device);
        const MicroBatch mine{global.inputs.slice_rows(group.rank() * rank_rows, (group.rank() + 1) * rank_rows),
                              global.targets.slice_rows(group.rank() * rank_rows, (group.rank() + 1) * rank_rows)};
        std::vector<staircase::Measurement> measured =
            measure_steps(*t.step, micro_batches_of(mine, int_setting(settings, "batch")), c.device, c.steps, group);
        staircase::Measurement state{"state_MiB", "MiB", bench::Better::Lower, {}};
        for (size_t s = 0; s < static_cast<size_t>(c.steps); ++s) {
          double sum = 0;
          for (const staircase::Measurement& m : measured)
            if (m.name == "params_MiB" || m.name == "grads_MiB" || m.name == "optimizer_MiB") sum += m.samples[s];
          state.samples.push_back(sum);
        }
        measured.insert(measured.begin(), std::move(state));
        return measured;
      },
      on_rung);
  const GPT2Config model = config.model_config ? *config.model_config : GPT2Config::from_name(config.memory.model);
  for (const staircase::Rung& rung : stairs.rungs) {
    const staircase::Settings settings = staircase::parse_settings(stairs.flags_for(rung));
    const ZeroSetting setting{static_cast<int>(int_setting(settings, "zero")), group.size(),
                              rung_bucket_bytes(settings), setting_or(settings, "zero-prefetch", "false") == "true"};
    out.theory.push_back(zero_state_theory(model, out.parameters, setting));
  }
  return out;
}

}  // namespace lab::ch07
