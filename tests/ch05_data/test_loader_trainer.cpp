// The loaders inside the trainer: its flags, identical losses for every stage on the same unshuffled
// data, and exact resume with a background loader (the position saved in the checkpoint is the number
// of batches handed out, whatever was read ahead).
#include <gtest/gtest.h>

#include <fstream>

#include "ch05_data/loaders/make_loader.h"
#include "ch10_gpt2/trainer.h"
#include "tests/common/data/shard_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab::ch05 {
namespace {

using lab::testing::expect_error;
using lab::testing::scratch_directory;

// A small learnable split: a repeating pattern over two shards.
TrainOptions tiny_run(const std::string& dir, const std::string& loader) {
  for (int s = 0; s < 2; ++s) {
    std::vector<uint16_t> tokens(1500);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i + 7 * s) % 89 * 397 % 50257);
    write_shard(cat(dir, "/train_00000", s, ".bin"), tokens);
  }
  TrainOptions o;
  o.data_train = dir + "/train_*.bin";
  o.model = "tiny";
  o.device = "cpu";
  o.batch = 2;
  o.seq = 16;
  o.steps = 4;
  o.lr = 1e-2;
  o.warmup_steps = 1;
  o.eval_every = 0;
  o.sample_tokens = 0;
  o.loader = loader;
  o.loader_depth = 2;
  o.log_json = cat(dir, "/log_", loader, ".jsonl");
  return o;
}

std::vector<double> logged(const std::string& path, const char* key) {
  std::ifstream in(path);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    const Json rec = Json::parse(line);
    if (rec.contains(key)) out.push_back(rec.at(key).as_number());
  }
  return out;
}

TEST(LoaderInTrainer, EveryStageGivesIdenticalLosses) {
  const std::string dir = scratch_directory();
  std::vector<double> reference_loss, reference_norm;
  for (const std::string& stage : loader_stages()) {
    const TrainOptions o = tiny_run(dir, stage);
    Trainer(o).run();
    const std::vector<double> loss = logged(o.log_json, "loss"), norm = logged(o.log_json, "grad_norm");
    ASSERT_EQ(loss.size(), 4u) << stage;
    EXPECT_EQ(logged(o.log_json, "data_ms").size(), 4u) << stage;
    if (reference_loss.empty()) {
      reference_loss = loss;
      reference_norm = norm;
      continue;
    }
    EXPECT_EQ(loss, reference_loss) << stage << " differs from " << loader_stages().front();
    EXPECT_EQ(norm, reference_norm) << stage << " differs from " << loader_stages().front();
  }
}

TEST(LoaderInTrainer, ResumesExactlyWithABackgroundLoader) {
  const std::string dir = scratch_directory();
  TrainOptions straight = tiny_run(dir, "prefetch");
  straight.shuffle = true;
  straight.steps = 6;
  straight.lr_decay_steps = 6;  // the same schedule for the run that stops at step 3
  Trainer(straight).run();

  TrainOptions first = straight;
  first.steps = 3;
  first.save = dir + "/ckpt";
  first.log_json = dir + "/log_first.jsonl";
  Trainer(first).run();
  TrainOptions second = straight;
  second.resume = dir + "/ckpt";
  second.log_json = dir + "/log_second.jsonl";
  Trainer(second).run();

  std::vector<double> resumed = logged(first.log_json, "loss");
  for (double loss : logged(second.log_json, "loss")) resumed.push_back(loss);
  EXPECT_EQ(resumed, logged(straight.log_json, "loss"));
}

TEST(LoaderInTrainer, FlagsSelectAndConfigureTheStage) {
  TrainOptions o;
  std::vector<std::string> args = {
      "gpt2_train", "--loader",       "prefetch", "--loader-depth",       "7", "--loader-workers",
      "3",          "--slow-read-us", "250",      "--slow-preprocess-us", "40"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ASSERT_TRUE(parse_train_options(static_cast<int>(argv.size()), argv.data(), o));
  EXPECT_EQ(o.loader, "prefetch");
  EXPECT_EQ(o.loader_depth, 7);
  EXPECT_EQ(o.loader_workers, 3);
  EXPECT_EQ(o.slow_read_us, 250);
  EXPECT_EQ(o.slow_preprocess_us, 40);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--loader", "turbo"}, {"--loader-depth", "0"}, {"--loader-workers", "0"}, {"--slow-read-us", "-1"}}) {
    std::vector<std::string> a = {"gpt2_train", bad[0], bad[1]};
    std::vector<char*> v;
    for (std::string& s : a) v.push_back(s.data());
    TrainOptions t;
    expect_error([&] { parse_train_options(static_cast<int>(v.size()), v.data(), t); }, ErrorKind::InvalidArgument,
                 {bad[0]});
  }
}

}  // namespace
}  // namespace lab::ch05
