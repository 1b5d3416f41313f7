// The trainer end to end on a tiny model and synthetic shards: the JSON log contract, learning, exact
// resume, checkpoint errors, and the command line's handling of bad flags.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "common/io/shards.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::scratch_directory;

// A learnable stream: a repeating pattern of 97 distinct token ids.
void write_pattern_shard(const std::string& path, int64_t n, int offset) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(((i + offset) % 97) * 311 % 50257);
  write_shard(path, tokens);
}

TrainOptions tiny_options(const std::string& dir) {
  write_pattern_shard(dir + "/train_000000.bin", 6000, 0);
  write_pattern_shard(dir + "/train_000001.bin", 3000, 5);
  write_pattern_shard(dir + "/val_000000.bin", 2000, 11);
  TrainOptions o;
  o.data_train = dir + "/train_*.bin";
  o.data_val = dir + "/val_000000.bin";
  o.model = "tiny";
  o.device = "cpu";
  o.batch = 2;
  o.seq = 16;
  o.steps = 6;
  o.lr = 1e-2;
  o.warmup_steps = 2;
  o.eval_every = 3;
  o.val_batches = 4;
  o.sample_tokens = 0;
  return o;
}

std::vector<Json> read_log(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

TEST(Trainer, WritesTheJsonLogContractAndLearns) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.log_json = dir + "/log.jsonl";
  Trainer trainer(o);
  const TrainSummary s = trainer.run();
  EXPECT_EQ(s.steps, 6);
  std::vector<double> losses;
  int evals = 0;
  for (const Json& rec : read_log(o.log_json)) {
    ASSERT_TRUE(rec.contains("step"));
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
  std::vector<double> a, b;
  for (const Json& r : read_log(dir + "/full.jsonl"))
    if (r.contains("loss")) a.push_back(r.at("loss").as_number());
  for (const Json& r : read_log(dir + "/resumed.jsonl"))
    if (r.contains("loss")) b.push_back(r.at("loss").as_number());
  EXPECT_EQ(a, b);
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

// Runs the real binary; returns its exit status and its stderr.
std::pair<int, std::string> run_gpt2_train(const std::string& args) {
  const std::string err = std::string(LAB_BINARY_DIR) + "/test_scratch/gpt2_train_stderr.txt";
  make_directories(parent_directory(err));
  const std::string cmd = std::string(LAB_BINARY_DIR) + "/bin/gpt2_train " + args + " >/dev/null 2>" + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(err)};
}

TEST(TrainerCommandLine, BadFlagsGiveOneErrorLineAndNonZeroExit) {
  const std::pair<std::string, std::string> cases[] = {
      {"--bogus 1", "unknown flag --bogus"},
      {"--batch 0", "--batch: 0 is out of range"},
      {"--lr abc", "--lr: expected a number"},
      {"--lr-schedule exponential", "not one of constant|cosine|linear"},
      {"--model d99", "unknown model 'd99'"},
      {"--dtype bf16", "bf16"},
      {"--preset nonsense", "unknown preset"},
      {"--total-batch-tokens 100 --batch 2 --seq 16", "not a multiple"},
      {"--data-train /nonexistent/shard_*.bin --steps 1", "/nonexistent/shard_*.bin"},
      {"--device cuda:7 --steps 1", "cuda"},
  };
  for (const auto& [args, expected] : cases) {
    const auto [code, err] = run_gpt2_train(args);
    EXPECT_EQ(code, 1) << args;
    EXPECT_NE(err.find(expected), std::string::npos) << args << " gave: " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << " gave: " << err;
    EXPECT_EQ(err.rfind("gpt2_train: error: ", 0), 0u) << err;
  }
  EXPECT_EQ(run_gpt2_train("--help").first, 0);
}

}  // namespace
}  // namespace lab
