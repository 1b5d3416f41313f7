// The trainer end to end on a tiny model and synthetic shards: the JSON log contract, learning, exact
// resume, checkpoint errors, and the command line's handling of bad and confusing flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::logged_losses;
using testing::read_log;
using testing::run_gpt2_train;
using testing::scratch_directory;
using testing::tiny_flags;
using testing::tiny_options;

TEST(Trainer, WritesTheJsonLogContractAndLearns) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.log_json = dir + "/log.jsonl";
  Trainer trainer(o);
  const TrainSummary s = trainer.run();
  EXPECT_EQ(s.steps, 6);
  std::vector<double> losses;
  int evals = 0;
  const std::vector<Json> log = read_log(o.log_json);
  ASSERT_FALSE(log.empty());
  const Json& header = log.front();  // the run's header: what ran, where and when
  EXPECT_EQ(header.at("log").as_string(), "gpt2_train");
  EXPECT_FALSE(header.at("date").as_string().empty());
  EXPECT_GT(header.at("machine").at("cpu_cores").as_int(), 0);
  for (const Json& rec : std::vector<Json>(log.begin() + 1, log.end())) {
    ASSERT_TRUE(rec.contains("step")) << rec.dump();
    if (rec.contains("val_loss")) {
      ++evals;
      EXPECT_GT(rec.at("val_loss").as_number(), 0.0);
      continue;
    }
    for (const char* key : {"loss", "lr", "grad_norm", "ms", "tokens_per_s", "mem_peak_bytes", "data_ms"})
      EXPECT_TRUE(rec.contains(key)) << key << " missing in " << rec.dump();
    EXPECT_TRUE(rec.contains("mfu"));  // null on the CPU, where no peak is known
    EXPECT_EQ(rec.at("step").as_int(), static_cast<int64_t>(losses.size()) + 1);
    EXPECT_GT(rec.at("tokens_per_s").as_number(), 0.0);
    EXPECT_GT(rec.at("mem_peak_bytes").as_number(), 0.0);
    losses.push_back(rec.at("loss").as_number());
  }
  ASSERT_EQ(losses.size(), 6u);
  EXPECT_EQ(evals, 3);  // before training, at step 3 and at the end
  EXPECT_NEAR(losses.front(), std::log(50257.0), 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.5) << "a repeating pattern must be learned quickly";
  EXPECT_EQ(s.last_loss, losses.back());
}

TEST(Trainer, SameFlagsAndSeedGiveTheSameRun) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 3;
  Trainer a(o), b(o);
  EXPECT_EQ(a.run().last_loss, b.run().last_loss);
  EXPECT_EQ(a.model().parameters().params().to_floats(), b.model().parameters().params().to_floats());
}

TEST(Trainer, FlashAttentionTrainsAsTheMaterialisedOneAlsoUnderSelectiveRecompute) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 3;
  const double materialized = Trainer(o).run().last_loss;
  o.attention = "flash";
  for (const char* recompute : {"none", "selective", "selective-ln"}) {
    o.recompute = recompute;
    EXPECT_NEAR(Trainer(o).run().last_loss, materialized, 1e-4) << "--recompute " << recompute;
  }
}

TEST(Trainer, OptimizerInBackwardTrainsAsThePlainStepWithoutClipping) {
  // Its refusals read the step the flags configure (--grad-clip, --total-batch-tokens), so it trains when they allow.
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 3;
  o.grad_clip = 0;
  const double plain = Trainer(o).run().last_loss;
  o.optimizer_in_backward = true;
  EXPECT_NEAR(Trainer(o).run().last_loss, plain, 1e-6);
  TrainOptions clipped = o;
  clipped.grad_clip = 1.0;
  expect_error([&] { Trainer{clipped}; }, ErrorKind::InvalidArgument,
               {"--optimizer-in-backward: gradient clipping by global norm (--grad-clip 1)"});
  TrainOptions accumulated = o;
  accumulated.total_batch_tokens = 2 * o.batch * o.seq;
  expect_error([&] { Trainer{accumulated}; }, ErrorKind::InvalidArgument,
               {"--optimizer-in-backward: gradient accumulation (2 micro-batches"});
}

TEST(TrainerCommandLine, ProfilePrintsTheOpsOfTheStepItNames) {
  const std::string dir = scratch_directory();
  const auto run = run_gpt2_train(tiny_flags(dir) + " --steps 3 --profile 2 --save ''");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("profile of step 2: "), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("profile of step 1"), std::string::npos);
  EXPECT_EQ(run.out.find("profile of step 3"), std::string::npos);
  for (const char* op : {"linear_forward", "attention_backward", "adamw_update", "total", "zero-fills"})
    EXPECT_NE(run.out.find(op), std::string::npos) << op;
  const auto beyond = run_gpt2_train(tiny_flags(dir) + " --steps 3 --profile 4");
  EXPECT_EQ(beyond.exit_code, 1);
  EXPECT_NE(beyond.err.find("--profile 4 is beyond --steps 3"), std::string::npos) << beyond.err;
}

TEST(Trainer, ResumeContinuesBitForBit) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 8;
  o.lr_decay_steps = 8;       // the schedule's horizon must not depend on when the run stops
  o.total_batch_tokens = 64;  // two micro-batches per step: the data position is not the step count
  o.shuffle = true;
  o.sample_tokens = 4;  // the sampler's generator is part of the state too
  o.log_json = dir + "/full.jsonl";
  Trainer full(o);
  const TrainSummary full_summary = full.run();

  TrainOptions first = o;
  first.steps = 4;
  first.save = dir + "/ckpt";
  first.log_json = dir + "/resumed.jsonl";
  Trainer(first).run();
  TrainOptions second = o;
  second.resume = dir + "/ckpt";
  second.log_json = dir + "/resumed.jsonl";
  Trainer resumed(second);
  const TrainSummary resumed_summary = resumed.run();

  EXPECT_EQ(resumed_summary.steps, 8);
  EXPECT_EQ(resumed.model().parameters().params().to_floats(), full.model().parameters().params().to_floats());
  EXPECT_EQ(resumed_summary.last_loss, full_summary.last_loss);
  EXPECT_EQ(resumed_summary.sample, full_summary.sample);
  EXPECT_EQ(logged_losses(dir + "/full.jsonl"), logged_losses(dir + "/resumed.jsonl"));
}

TEST(Trainer, ResumeRejectsChangedBatchShape) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 1;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  TrainOptions changed = tiny_options(dir);
  changed.resume = dir + "/ckpt";
  changed.batch = 4;
  expect_error([&] { Trainer t(changed); }, ErrorKind::InvalidArgument, {"batch", "ckpt"});
}

TEST(Trainer, BadCheckpointsGiveClearErrorsAndAreNotDamaged) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 2;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  const std::string good_state = read_file(dir + "/ckpt/state.json");

  TrainOptions r = tiny_options(dir);
  r.resume = dir + "/missing";
  expect_error([&] { Trainer t(r); }, ErrorKind::Io, {"missing"});

  write_file_atomic(dir + "/ckpt/state.json", "{\"format\": \"gpt2-labs-checkpoint\", \"version\": 1");
  r.resume = dir + "/ckpt";
  expect_error([&] { Trainer t(r); }, ErrorKind::Format, {"state.json"});
  write_file_atomic(dir + "/ckpt/state.json", good_state);

  const std::string model = read_file(dir + "/ckpt/model.safetensors");
  write_file_atomic(dir + "/ckpt/model.safetensors", model.substr(0, model.size() / 2));
  expect_error([&] { Trainer t(r); }, ErrorKind::Format, {"model.safetensors"});

  // A failed run that was asked to save must leave the existing checkpoint as it was.
  write_file_atomic(dir + "/ckpt/model.safetensors", model);
  TrainOptions failing = tiny_options(dir);
  failing.save = dir + "/ckpt";
  failing.data_train = dir + "/nothing_*.bin";
  expect_error([&] { Trainer(failing).run(); }, ErrorKind::Io, {"nothing_"});
  EXPECT_EQ(read_file(dir + "/ckpt/model.safetensors"), model);
  EXPECT_EQ(read_file(dir + "/ckpt/state.json"), good_state);
}

TEST(TrainerCommandLine, BadFlagsGiveOneErrorLineAndNonZeroExit) {
  const std::pair<std::string, std::string> cases[] = {
      {"--bogus 1", "unknown flag --bogus"},
      {"--batch 0", "--batch: 0 is out of range"},
      {"--lr abc", "--lr: expected a number"},
      {"--lr-schedule exponential", "not one of constant|cosine|linear"},
      {"--model d99", "unknown model 'd99'"},
      {"--dtype fp8", "not one of fp32|tf32|bf16|fp16"},
      {"--attention fast", "not one of materialized|batched|flash"},
      {"--cuda-graphs --device cpu --steps 1", "--cuda-graphs needs a CUDA device (--device cpu"},
      {"--activations 8bit", "not one of fp32|16bit"},
      {"--activations 16bit --device cpu --steps 1", "--activations 16bit needs 16-bit matmuls"},
      {"--cuda-graphs --profile 1 --steps 1", "--cuda-graphs with --profile"},
      {"--preset nonsense", "unknown preset"},
      {"--total-batch-tokens 100 --batch 2 --seq 16", "not a multiple"},
      {"--data-train /nonexistent/shard_*.bin --steps 1", "/nonexistent/shard_*.bin"},
      {"--device cuda:7 --steps 1", "cuda"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_gpt2_train(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << " gave: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " gave: " << r.err;
    EXPECT_EQ(r.err.rfind("gpt2_train: error: ", 0), 0u) << r.err;
  }
  EXPECT_EQ(run_gpt2_train("--help").exit_code, 0);
}

// ---------------------------------------------------------------- flags that used to confuse

TEST(Trainer, ResumingACheckpointAlreadyAtStepsIsRefused) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 2;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  TrainOptions r = tiny_options(dir);
  r.resume = dir + "/ckpt";
  r.steps = 1;
  expect_error([&] { Trainer t(r); }, ErrorKind::InvalidArgument, {"already at step 2", "--steps 1"});
  r.steps = 2;  // nothing left to train either
  expect_error([&] { Trainer t(r); }, ErrorKind::InvalidArgument, {"already at step 2", "--steps 2"});
  const auto run = run_gpt2_train(tiny_flags(dir) + " --resume " + dir + "/ckpt --steps 1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("already at step 2"), std::string::npos) << run.err;
  EXPECT_EQ(run.out.find("done:"), std::string::npos) << run.out;
}

TEST(Trainer, TrainingShardsWithoutValidationSayThatThereIsNoValidation) {
  const std::string dir = scratch_directory();
  const auto run = run_gpt2_train(tiny_flags(dir) + " --data-val '' --steps 2 --eval-every 1");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string note = "validation: none (--data-train without --data-val)";
  const size_t first = run.out.find(note);
  EXPECT_NE(first, std::string::npos) << run.out;
  EXPECT_EQ(run.out.find(note, first + 1), std::string::npos) << "said once:\n" << run.out;
  EXPECT_NE(run.out.find("val loss none (no --data-val)"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("nan"), std::string::npos) << run.out;
  const auto help = run_gpt2_train("--help");
  EXPECT_NE(help.out.find("with --data-train: none"), std::string::npos) << help.out;
}

TEST(Trainer, ModelMustMatchTheWeightsOrCheckpointItIsReadFrom) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 1;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  const std::string weights = dir + "/ckpt/model.safetensors";

  TrainOptions init = tiny_options(dir);
  init.init = weights;
  init.model = "d12";
  expect_error([&] { Trainer t(init); }, ErrorKind::InvalidArgument,
               {"--model d12", "is not the model in " + weights, "2 layers", "leave --model out"});
  init.model = "tiny";  // the same model: nothing to complain about
  EXPECT_EQ(Trainer(init).model().config(), GPT2Config::from_name("tiny"));
  init.model = "";
  EXPECT_EQ(Trainer(init).model().config(), GPT2Config::from_name("tiny"));

  TrainOptions resume = tiny_options(dir);
  resume.resume = dir + "/ckpt";
  resume.model = "small";
  expect_error([&] { Trainer t(resume); }, ErrorKind::InvalidArgument, {"--model small", "--resume takes the model"});

  TrainOptions file = tiny_options(dir);
  file.resume = weights;
  expect_error([&] { Trainer t(file); }, ErrorKind::Io, {"--resume", weights, "is a file, not a checkpoint directory"});
}

TEST(TrainerCommandLine, ErrorsFromAPresetsFlagsNameThePreset) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 1;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  // baseline-fp32 sets --model d12, which is not the model of these tiny weights.
  const auto run = run_gpt2_train("--data-train '" + o.data_train + "' --device cpu --preset baseline-fp32 --init " +
                                  dir + "/ckpt/model.safetensors");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("(--model d12 set by --preset baseline-fp32)"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

}  // namespace
}  // namespace lab
