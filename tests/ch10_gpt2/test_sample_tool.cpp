// gpt2_sample, the program a user generates text with: from a checkpoint directory and from a weights file in
// Hugging Face's layout (written here, as OpenAI's GPT-2 files are laid out), its text equal to the sampler's
// in process; and the default run's checkpoint directory under runs/.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/sampler.h"
#include "ch10_gpt2/train_options.h"
#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "common/io/safetensors.h"
#include "common/nn/gpt2_weights.h"
#include "common/text/tokenizer.h"
#include "common/util/rng.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::ProcessResult;
using testing::run_program;
using testing::scratch_directory;
using testing::tiny_options;

// A tiny model trained for two steps and saved; returns the checkpoint directory.
std::string trained_checkpoint(const std::string& dir) {
  TrainOptions o = tiny_options(dir);
  o.steps = 2;
  o.save = dir + "/ckpt";
  Trainer(o).run();
  return o.save;
}

// What gpt2_sample must print: the prompt, then the decoded tokens the in-process sampler draws.
std::string expected_text(const std::string& weights, const std::string& prompt, int64_t tokens, uint64_t seed) {
  GPT2 model(read_gpt2_config(weights), Device::cpu());
  load_gpt2_weights(model, weights);
  const GPT2Tokenizer tokenizer = GPT2Tokenizer::load_default();
  SampleOptions options;
  options.max_new_tokens = tokens;
  Rng rng(seed);
  std::string text = prompt;
  for (int32_t id : sample_tokens(model, tokenizer.encode(prompt), options, rng)) text += sampled_text(tokenizer, id);
  return text + "\n";
}

TEST(SampleTool, ContinuesThePromptFromACheckpointAsTheSamplerDoes) {
  const std::string dir = scratch_directory();
  const std::string ckpt = trained_checkpoint(dir);
  const std::string args = "--load " + ckpt + " --prompt 'To be' --tokens 12 --seed 7 --device cpu --threads 1";
  const ProcessResult first = run_program("gpt2_sample", args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, expected_text(ckpt + "/model.safetensors", "To be", 12, 7));
  EXPECT_EQ(run_program("gpt2_sample", args).out, first.out);  // same seed, same text
  EXPECT_NE(run_program("gpt2_sample", args + " --seed 8").out, first.out);
}

TEST(SampleTool, ReadsAHuggingFaceWeightsFileAndTheTrainerInitialisesFromIt) {
  const std::string dir = scratch_directory();
  const std::string ckpt = trained_checkpoint(dir);
  // Hugging Face's GPT-2 files name their tensors as the checkpoint does, and some exports prefix them with
  // "transformer." and carry the tied lm_head and the attention-mask buffers: rewrite it so.
  const SafetensorsReader plain(ckpt + "/model.safetensors");
  std::vector<NamedTensor> renamed;
  for (const std::string& name : plain.names()) renamed.push_back({"transformer." + name, plain.load(name)});
  renamed.push_back({"lm_head.weight", plain.load("wte.weight")});
  const std::string hf = dir + "/hf_model.safetensors";
  std::map<std::string, std::string> metadata = plain.metadata();  // n_head: a 64-wide model is not 1 head of 64
  metadata["format"] = "pt";
  write_safetensors(hf, renamed, metadata);

  const ProcessResult sampled =
      run_program("gpt2_sample", "--load " + hf + " --prompt 'To be' --tokens 12 --seed 7 --device cpu --threads 1");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_EQ(sampled.out, expected_text(ckpt + "/model.safetensors", "To be", 12, 7));

  const ProcessResult trained =
      testing::run_gpt2_train(testing::tiny_flags(dir) + " --model '' --init " + hf + " --steps 1 --save ''");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.out.find("--init: loaded "), std::string::npos) << trained.out;
  EXPECT_NE(trained.out.find("from " + hf + " (2 layers"), std::string::npos) << trained.out;
}

TEST(SampleTool, BadInputGetsOneLine) {
  const std::string dir = scratch_directory();
  const std::string ckpt = trained_checkpoint(dir);
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += " word";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--prompt hi", "--load is required"},
      {"--load " + dir + "/nothing", "does not exist"},
      {"--load " + dir + "/train_000000.bin", "train_000000.bin"},
      {"--load " + ckpt + " --prompt '" + long_prompt + "'", "more than the model's block size"},
      {"--load " + ckpt + " --device gpu", "expected auto, cpu, cuda or cuda:N"},
      {"--load " + ckpt + " --token 3", "did you mean --tokens?"},
  };
  for (const auto& [args, expected] : cases) {
    const ProcessResult r = run_program("gpt2_sample", "--device cpu --threads 1 " + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << " gave: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << " gave: " << r.err;
  }
}

TEST(DefaultRun, KeepsItsCheckpointInAFreshDirectoryUnderRuns) {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), "gpt2_train");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    TrainOptions o;
    EXPECT_TRUE(parse_train_options(static_cast<int>(argv.size()), argv.data(), o));
    return o.save;
  };
  EXPECT_EQ(parse({}).rfind("runs/", 0), 0u) << parse({});
  EXPECT_EQ(parse({"--steps", "5"}).rfind("runs/", 0), 0u);
  EXPECT_EQ(parse({"--save", ""}), "");             // none, when asked
  EXPECT_EQ(parse({"--save", "mine"}), "mine");     // the user's choice
  EXPECT_EQ(parse({"--model", "tiny"}), "");        // not the default run: no checkpoint unless asked
  EXPECT_EQ(parse({"--data-train", "x.bin"}), "");  // neither

  // A directory that exists already is never reused.
  const std::string parent = scratch_directory() + "/runs";
  const std::string first = fresh_run_directory(parent);
  EXPECT_EQ(first.rfind(parent + "/", 0), 0u);
  std::filesystem::create_directories(first);
  const std::string second = fresh_run_directory(parent);
  EXPECT_NE(second, first);
  EXPECT_FALSE(std::filesystem::exists(second));
}

}  // namespace
}  // namespace lab
