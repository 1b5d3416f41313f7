// The run's typed configuration and its one builder (ch10_gpt2/run_config.h), on the CPU: every refusal comes
// with its kind and its line, and only from run_refusal; build_run composes the model, the weights, the optimizer
// and the step in the order the trainer relies on, giving the losses of the same run built by hand. (The trainer
// and gpt2_step_bench build through it: their own tests run every rung end to end.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ch07_memory/optimizer_in_backward.h"
#include "ch10_gpt2/run_config.h"
#include "ch10_gpt2/run_settings.h"
#include "common/core/step_profile.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

RunConfig tiny_run() {
  RunConfig config;
  config.model = test::tiny_gpt2_config(200);
  return config;
}

std::vector<MicroBatch> random_batches(int64_t count, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<MicroBatch> batches;
  for (int64_t i = 0; i < count; ++i)
    batches.push_back({test::random_ids({2, 16}, rng, vocab), test::random_ids({2, 16}, rng, vocab)});
  return batches;
}

// The losses of `steps` steps of `run` over fresh batches (the same for every run).
std::vector<double> losses_of(const std::function<TrainStepResult(const BatchSource&, double)>& step, int64_t steps,
                              int64_t micro_per_step) {
  const std::vector<MicroBatch> batches = random_batches(steps * micro_per_step, 200, 9);
  size_t next = 0;
  const BatchSource source = [&] { return batches[next++]; };
  std::vector<double> losses;
  for (int64_t s = 0; s < steps; ++s) losses.push_back(step(source, 1e-3).loss);
  return losses;
}

TEST(RunConfig, EveryRefusalHasItsKindAndLine) {
  struct Case {
    std::string what;
    std::function<void(RunConfig&)> change;
    ErrorKind kind;
    std::string line;  // a part of the line users see
  };
  const std::vector<Case> cases = {
      {"tf32 on the CPU", [](RunConfig& c) { c.math = MathMode::TF32; }, ErrorKind::Unsupported,
       "--dtype tf32 needs a GPU"},
      {"graphs on the CPU", [](RunConfig& c) { c.cuda_graphs = true; }, ErrorKind::InvalidArgument,
       "--cuda-graphs needs a CUDA device"},
      {"fp16 with the optimizer in backward",
       [](RunConfig& c) {
         c.math = MathMode::FP16;
         c.memory.optimizer_in_backward = true;
       },
       ErrorKind::Unsupported, "--dtype fp16 with --optimizer-in-backward"},
      {"bf16 under ZeRO-3",
       [](RunConfig& c) {
         c.math = MathMode::BF16;
         c.memory.zero = 3;
       },
       ErrorKind::Unsupported, "--dtype bf16 with --zero 3"},
      {"clipping with the optimizer in backward",
       [](RunConfig& c) {
         c.memory.optimizer_in_backward = true;
         c.step.grad_clip = 1.0;
       },
       ErrorKind::InvalidArgument, "--optimizer-in-backward: gradient clipping by global norm"},
      {"accumulation with the optimizer in backward",
       [](RunConfig& c) {
         c.memory.optimizer_in_backward = true;
         c.step = {2, 0.0, false};
       },
       ErrorKind::InvalidArgument, "--optimizer-in-backward: gradient accumulation (2 micro-batches"},
      {"ZeRO stage 4", [](RunConfig& c) { c.memory.zero = 4; }, ErrorKind::InvalidArgument, "--zero 4: the stages"},
      {"prefetch without stage 3",
       [](RunConfig& c) {
         c.memory.zero = 2;
         c.memory.zero_prefetch = true;
       },
       ErrorKind::InvalidArgument, "--zero-prefetch gathers stage 3's blocks ahead"},
      {"ZeRO with tensor parallelism",
       [](RunConfig& c) {
         c.memory.zero = 1;
         c.parallel.layout = {1, 2, 1};
       },
       ErrorKind::InvalidArgument, "shards over data-parallel ranks only"},
      {"offload under ZeRO",
       [](RunConfig& c) {
         c.memory.zero = 1;
         c.memory.offload_optimizer = true;
       },
       ErrorKind::InvalidArgument, "--offload optimizer and --zero exclude each other"},
      {"offload with the optimizer in backward",
       [](RunConfig& c) {
         c.memory.offload_optimizer = true;
         c.memory.optimizer_in_backward = true;
       },
       ErrorKind::InvalidArgument, "--offload optimizer and --optimizer-in-backward exclude each other"},
      {"the optimizer in backward on two ranks",
       [](RunConfig& c) {
         c.memory.optimizer_in_backward = true;
         c.parallel.layout = {2, 1, 1};
       },
       ErrorKind::InvalidArgument, "--optimizer-in-backward runs in one process only"},
      {"batched attention under selective recompute",
       [](RunConfig& c) { c.rungs = ModelRungs::parse("fused", "batched", "selective"); }, ErrorKind::InvalidArgument,
       "--attention batched keeps its own"},
      {"the chunked head under ZeRO-2",
       [](RunConfig& c) {
         c.rungs = ModelRungs::parse("reference", "materialized", "none", "fp32", "chunked");
         c.memory.zero = 2;
       },
       ErrorKind::Unsupported, "--lm-head chunked with --zero 2"},
      {"the chunked head with tensor parallelism",
       [](RunConfig& c) {
         c.rungs = ModelRungs::parse("reference", "materialized", "none", "fp32", "chunked");
         c.parallel.layout = {1, 2, 1};
       },
       ErrorKind::Unsupported, "--lm-head chunked with --tp"},
      {"16-bit activations with fp32 products",
       [](RunConfig& c) { c.rungs = ModelRungs::parse("reference", "materialized", "none", "16bit"); },
       ErrorKind::InvalidArgument, "--activations 16bit needs 16-bit matmuls"},
      {"16-bit activations with tensor parallelism",
       [](RunConfig& c) {
         c.math = MathMode::BF16;
         c.rungs = ModelRungs::parse("reference", "materialized", "none", "16bit");
         c.parallel.layout = {1, 2, 1};
       },
       ErrorKind::Unsupported, "--activations 16bit with --tp or --pp"},
  };
  ASSERT_FALSE(run_refusal(tiny_run()));
  for (const Case& c : cases) {
    RunConfig config = tiny_run();
    c.change(config);
    const std::optional<RunRefusal> refusal = run_refusal(config);
    ASSERT_TRUE(refusal) << c.what;
    EXPECT_EQ(refusal->kind, c.kind) << c.what << ": " << refusal->line;
    EXPECT_NE(refusal->line.find(c.line), std::string::npos) << c.what << ": " << refusal->line;
    EXPECT_EQ(refusal->line.find('\n'), std::string::npos) << c.what << ": one line";
    try {
      build_run(config);
      ADD_FAILURE() << c.what << ": built";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), c.kind) << c.what;
      EXPECT_NE(std::string(e.what()).find(c.line), std::string::npos) << c.what << ": " << e.what();
    }
  }
}

TEST(RunConfig, TheSameSettingsWithoutTheirConflictTrain) {
  // Each refused pair's two settings train alone: the refusal is of the pair, not of either rung.
  for (const auto& change : std::vector<std::function<void(RunConfig&)>>{
           [](RunConfig& c) { c.math = MathMode::FP16; },
           [](RunConfig& c) {
             c.memory.optimizer_in_backward = true;
             c.step.grad_clip = 0;
           },
           [](RunConfig& c) { c.memory.offload_optimizer = true; },
           [](RunConfig& c) { c.rungs = ModelRungs::parse("fused", "materialized", "block"); },
           [](RunConfig& c) {
             c.math = MathMode::BF16;
             c.rungs = ModelRungs::parse("reference", "flash", "selective", "fp32");
           },
           [](RunConfig& c) {
             c.math = MathMode::BF16;
             c.rungs = ModelRungs::parse("fused", "flash", "block", "16bit");
           },
           [](RunConfig& c) {
             c.math = MathMode::BF16;
             c.rungs = ModelRungs::parse("fused", "flash", "selective", "16bit", "chunked");
             c.memory.zero = 1;
           }}) {
    RunConfig config = tiny_run();
    change(config);
    EXPECT_FALSE(run_refusal(config)) << run_refusal(config)->line;
    TrainingRun run = build_run(config);
    const std::vector<double> losses = losses_of([&](const BatchSource& s, double lr) { return run.run(s, lr); }, 2, 1);
    for (const double loss : losses) EXPECT_TRUE(std::isfinite(loss));
  }
}

TEST(RunConfig, BuildsTheRunATrainerWouldBuildByHand) {
  // bf16 mixed precision with every model rung, two micro-batches a step, clipping at 0.5, and weights set by the
  // caller: the losses of the hand-built run, bit for bit. The 16-bit weight copy must be taken after the caller's
  // weights, which the matching losses show (a copy of init_weights(1)'s would train other weights).
  RunConfig config = tiny_run();
  config.math = MathMode::BF16;
  config.rungs = ModelRungs::parse("fused", "flash", "block", "16bit");
  config.step = {2, 0.5, false};
  config.adamw.weight_decay = 0.01f;
  int weight_calls = 0;
  TrainingRun built = build_run(config, [&](GPT2& model, AdamW& optimizer) {
    ++weight_calls;
    EXPECT_EQ(optimizer.steps_taken(), 0);
    model.init_weights(7);
  });
  EXPECT_EQ(weight_calls, 1);
  EXPECT_EQ(built.step->config().accum_steps, 2);
  EXPECT_EQ(built.optimizer->config().weight_decay, 0.01f);

  ModelOptions options;
  config.rungs.apply(options, DType::BF16);
  GPT2 model(config.model, Device::cpu(), options);
  model.init_weights(7);
  AdamW optimizer(model.parameters(), config.adamw);
  TrainStep step(model, optimizer, config.step);
  apply_math_mode(MathMode::BF16, step);

  const std::vector<double> ours = losses_of([&](const BatchSource& s, double lr) { return built.run(s, lr); }, 3, 2);
  const std::vector<double> by_hand = losses_of([&](const BatchSource& s, double lr) { return step.run(s, lr); }, 3, 2);
  EXPECT_EQ(ours, by_hand);
}

TEST(RunConfig, MemoryRungsChooseTheStepAndTheOptimizer) {
  RunConfig config = tiny_run();
  config.memory.optimizer_in_backward = true;
  config.step.grad_clip = 0;
  TrainingRun in_backward = build_run(config);
  EXPECT_NE(dynamic_cast<ch07::OptimizerInBackwardStep*>(in_backward.step.get()), nullptr);
  config.memory = {};
  TrainingRun plain = build_run(config);
  EXPECT_EQ(dynamic_cast<ch07::OptimizerInBackwardStep*>(plain.step.get()), nullptr);
  EXPECT_FALSE(plain.optimizer->sharded());
  EXPECT_FALSE(plain.graphed);
}

TEST(RunConfig, FromAStaircaseRungsSettings) {
  // gpt2_train's flag names, as a chapter's staircase writes its rungs.
  const RunConfig c = run_config_from_settings(
      staircase::parse_settings(
          {"--model",     "tiny",        "--batch",     "2",       "--seq",     "16",        "--total-batch-tokens",
           "128",         "--grad-clip", "0",           "--dtype", "bf16",      "--kernels", "fused",
           "--attention", "flash",       "--recompute", "block",   "--offload", "optimizer"}),
      Device::cpu());
  EXPECT_EQ(c.model, GPT2Config::from_name("tiny"));
  EXPECT_EQ(c.math, MathMode::BF16);
  EXPECT_EQ(c.rungs.str(), "--kernels fused --attention flash --recompute block");
  EXPECT_TRUE(c.memory.offload_optimizer);
  EXPECT_FALSE(c.memory.optimizer_in_backward);
  EXPECT_EQ(c.step.accum_steps, 4);
  EXPECT_EQ(c.step.grad_clip, 0.0);
  const RunConfig plain = run_config_from_settings(
      staircase::parse_settings({"--model", "tiny", "--batch", "2", "--seq", "16", "--optimizer-in-backward"}),
      Device::cpu());
  EXPECT_TRUE(plain.memory.optimizer_in_backward);
  EXPECT_EQ(plain.step.accum_steps, 1);
  EXPECT_EQ(plain.step.grad_clip, 1.0);  // gpt2_train's default: the optimizer in backward then refuses it
  EXPECT_TRUE(run_refusal(plain));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--batch", "2", "--seq", "16"},
        {"--model", "tiny", "--seq", "16"},
        {"--model", "tiny", "--batch", "2", "--seq", "16", "--offload", "gpu"},
        {"--model", "tiny", "--batch", "2", "--seq", "16", "--total-batch-tokens", "100"}})
    EXPECT_THROW(run_config_from_settings(staircase::parse_settings(bad), Device::cpu()), Error);
}

TEST(RunConfig, FromALayoutRungsSettings) {
  // A ZeRO rung as chapter 7's staircase writes it: the step's tokens over 2 data-parallel ranks' micro-batches.
  const RunConfig zero = run_config_from_settings(
      staircase::parse_settings({"--model", "tiny", "--batch", "2", "--seq", "16", "--total-batch-tokens", "256",
                                 "--dp", "2", "--dp-stage", "bucketed", "--bucket-mb", "0.5", "--zero", "3",
                                 "--zero-prefetch"}),
      Device::cpu());
  EXPECT_EQ(zero.parallel.layout.str(), comm::ParallelLayout({2, 1, 1}).str());
  EXPECT_EQ(zero.parallel.dp_stage, dist::DpStage::Bucketed);
  EXPECT_EQ(zero.parallel.bucket_bytes, int64_t{1} << 19);
  EXPECT_EQ(zero.step.accum_steps, 4);  // 256 tokens = 4 x (2 rows x 16 tokens x 2 ranks)
  EXPECT_EQ(zero.memory.zero, 3);
  EXPECT_TRUE(zero.memory.zero_prefetch);
  // gpt2_train's defaults for the layout's flags.
  const RunConfig plain = run_config_from_settings(
      staircase::parse_settings({"--model", "tiny", "--batch", "2", "--seq", "16"}), Device::cpu());
  EXPECT_EQ(plain.parallel.layout.ranks(), 1);
  EXPECT_EQ(plain.parallel.dp_stage, dist::DpStage::Overlap);
  EXPECT_EQ(plain.parallel.pp_schedule, ch08::PpSchedule::OneFOneB);
  // A pipeline's step is its --micro-batches; --total-batch-tokens may say the same, not another number.
  const auto pipeline = [](const std::string& total) {
    return run_config_from_settings(
        staircase::parse_settings({"--model", "tiny", "--batch", "2", "--seq", "16", "--pp", "2", "--micro-batches",
                                   "3", "--pp-schedule", "gpipe", "--total-batch-tokens", total}),
        Device::cpu());
  };
  EXPECT_EQ(pipeline("0").step.accum_steps, 3);
  EXPECT_EQ(pipeline("96").step.accum_steps, 3);
  EXPECT_EQ(pipeline("96").parallel.pp_schedule, ch08::PpSchedule::GPipe);
  testing::expect_error([&] { pipeline("64"); }, ErrorKind::InvalidArgument,
                        {"--total-batch-tokens 64 is 2 micro-batches per step, but --micro-batches is 3"});
  // The tokens must be whole global micro-batches: 2 x 16 x 2 ranks = 64.
  testing::expect_error(
      [] {
        run_config_from_settings(staircase::parse_settings({"--model", "tiny", "--batch", "2", "--seq", "16", "--dp",
                                                            "2", "--total-batch-tokens", "96"}),
                                 Device::cpu());
      },
      ErrorKind::InvalidArgument, {"is not a multiple of --batch x --seq x dp = 2 x 16 x 2 = 64"});
  // A model with no name comes from the caller.
  const GPT2Config unnamed = test::tiny_gpt2_config(200);
  EXPECT_EQ(run_config_from_settings(staircase::parse_settings({"--batch", "2", "--seq", "16"}), Device::cpu(), unnamed)
                .model,
            unnamed);
}

// The steps whose gradients are sharded or freed as backward goes take their norm on the device like the plain
// step: enqueue() runs no reduction that returns to the host (sum_squares), and the losses and norms are the plain
// step's (the gradients are the same; the norm's sum of squares is added in another order, within f32 rounding).
TEST(RunConfig, StepsWithShardedOrFreedGradientsReadNoNormBack) {
  RunConfig plain = tiny_run();
  plain.step.grad_clip = 0;  // the optimizer in backward cannot clip
  const std::vector<MicroBatch> batches = random_batches(2, 200, 4);
  struct Variant {
    const char* name;
    std::function<void(RunConfig&)> set;
  };
  const Variant variants[] = {{"plain", [](RunConfig&) {}},
                              {"zero 2", [](RunConfig& c) { c.memory.zero = 2; }},
                              {"zero 3", [](RunConfig& c) { c.memory.zero = 3; }},
                              {"optimizer in backward", [](RunConfig& c) { c.memory.optimizer_in_backward = true; }}};
  std::vector<TrainStepResult> reference;
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    RunConfig config = plain;
    v.set(config);
    TrainingRun run = build_run(config);
    for (size_t s = 0; s < batches.size(); ++s) {
      StepProfile profile;
      run.step->enqueue([&] { return batches[s]; }, 1e-3);
      profile.close();
      const TrainStepResult r = run.step->report();
      std::vector<std::string> ops;
      for (const ProfileRow& row : profile.rows(ProfileKind::Op)) ops.push_back(row.name);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "sum_squares"), 0) << "a norm read back in enqueue()";
      if (reference.size() < batches.size()) {
        reference.push_back(r);
        continue;
      }
      EXPECT_GT(std::count(ops.begin(), ops.end(), "accumulate_sum_squares"), 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "norm_and_scale"), 1);
      EXPECT_FLOAT_EQ(static_cast<float>(r.loss), static_cast<float>(reference[s].loss)) << "step " << s;
      EXPECT_NEAR(r.grad_norm, reference[s].grad_norm, 1e-6 * reference[s].grad_norm) << "step " << s;
    }
  }
}

TEST(RunConfig, OneProcessRefusesALayoutOfManyRanks) {
  RunConfig config = tiny_run();
  config.parallel.layout = {2, 1, 1};
  EXPECT_THROW(build_run(config), Error);
}

}  // namespace
}  // namespace lab
