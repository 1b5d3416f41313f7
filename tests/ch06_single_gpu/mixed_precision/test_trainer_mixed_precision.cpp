// Mixed precision in the trainer: --dtype bf16 and fp16 train on the CPU; fp16 logs its loss scale and skipped
// steps in every step line; a checkpoint keeps the scaler's state and a resumed fp16 run continues bit for bit
// (the scale included); a checkpoint without that state (an fp32 run's, or an older one) resumes under fp16 from
// the initial scale; fp16 with pipeline stages is refused with one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::logged_losses;
using testing::read_log;
using testing::run_gpt2_train;
using testing::scratch_directory;
using testing::tiny_flags;
using testing::tiny_options;

// The step lines of a JSON log (not its header or evaluations).
std::vector<Json> step_lines(const std::string& path) {
  std::vector<Json> steps;
  for (const Json& r : read_log(path))
    if (r.contains("loss")) steps.push_back(r);
  return steps;
}

std::vector<double> logged_scales(const std::string& path) {
  std::vector<double> scales;
  for (const Json& r : step_lines(path)) scales.push_back(r.at("loss_scale").as_number());
  return scales;
}

TEST(TrainerMixedPrecision, Bf16AndFp16TrainAndFp16LogsItsScale) {
  const std::string dir = scratch_directory();
  for (const char* dtype : {"bf16", "fp16"}) {
    TrainOptions o = tiny_options(dir);
    o.dtype = dtype;
    o.loss_scale_interval = 2;
    o.log_json = dir + "/" + dtype + ".jsonl";
    Trainer(o).run();
    const std::vector<Json> steps = step_lines(o.log_json);
    ASSERT_EQ(steps.size(), 6u);
    EXPECT_LT(steps.back().at("loss").as_number(), steps.front().at("loss").as_number() - 0.5) << dtype;
    if (std::string(dtype) == "bf16") {
      for (const Json& r : steps) EXPECT_FALSE(r.contains("loss_scale")) << r.dump();
      continue;
    }
    EXPECT_EQ(logged_scales(o.log_json), (std::vector<double>{65536, 65536, 131072, 131072, 262144, 262144}));
    for (const Json& r : steps) {
      EXPECT_FALSE(r.at("skipped").as_bool()) << r.dump();
      EXPECT_EQ(r.at("skipped_steps").as_int(), 0);
    }
  }
}

TEST(TrainerMixedPrecision, Fp16ResumeContinuesWithTheSavedScale) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.dtype = "fp16";
  o.steps = 8;
  o.lr_decay_steps = 8;
  o.loss_scale = 1024;
  o.loss_scale_interval = 3;  // the scale doubles after steps 3 and 6: a resume at 4 must know it grew once
  o.log_json = dir + "/full.jsonl";
  Trainer full(o);
  full.run();

  TrainOptions first = o;
  first.steps = 4;
  first.save = dir + "/ckpt";
  first.log_json = dir + "/resumed.jsonl";
  Trainer(first).run();
  const Json state = Json::parse(read_file(dir + "/ckpt/state.json"));
  EXPECT_EQ(state.at("loss_scaler").at("scale").as_number(), 2048.0);
  EXPECT_EQ(state.at("loss_scaler").at("clean_steps").as_int(), 1);
  TrainOptions second = o;
  second.resume = dir + "/ckpt";
  second.log_json = dir + "/resumed.jsonl";
  Trainer resumed(second);
  resumed.run();

  EXPECT_EQ(logged_scales(dir + "/full.jsonl"), (std::vector<double>{1024, 1024, 1024, 2048, 2048, 2048, 4096, 4096}));
  EXPECT_EQ(logged_scales(dir + "/resumed.jsonl"), logged_scales(dir + "/full.jsonl"));
  EXPECT_EQ(logged_losses(dir + "/resumed.jsonl"), logged_losses(dir + "/full.jsonl"));
  EXPECT_EQ(resumed.model().parameters().params().to_floats(), full.model().parameters().params().to_floats());
}

TEST(TrainerMixedPrecision, ACheckpointWithoutScalerStateResumesUnderFp16) {
  const std::string dir = scratch_directory();
  TrainOptions o = tiny_options(dir);
  o.steps = 2;
  o.save = dir + "/ckpt";
  Trainer(o).run();  // fp32: state.json has no loss_scaler
  EXPECT_FALSE(Json::parse(read_file(dir + "/ckpt/state.json")).contains("loss_scaler"));
  TrainOptions fp16 = tiny_options(dir);
  fp16.steps = 4;
  fp16.dtype = "fp16";
  fp16.resume = dir + "/ckpt";
  fp16.log_json = dir + "/fp16.jsonl";
  Trainer(fp16).run();
  EXPECT_EQ(logged_scales(fp16.log_json), (std::vector<double>{65536, 65536}));
}

TEST(TrainerMixedPrecision, CommandLineAcceptsTheDtypesAndRefusesOthers) {
  const std::string dir = scratch_directory();
  const auto help = run_gpt2_train("--help");
  EXPECT_NE(help.out.find("bf16 or fp16: mixed precision"), std::string::npos) << help.out;
  const auto fp16 = run_gpt2_train(tiny_flags(dir) + " --steps 2 --dtype fp16");
  EXPECT_EQ(fp16.exit_code, 0) << fp16.err;
  EXPECT_NE(fp16.out.find("| scale 65536"), std::string::npos) << fp16.out;
  const auto fp8 = run_gpt2_train(tiny_flags(dir) + " --dtype fp8");
  EXPECT_EQ(fp8.exit_code, 1);
  EXPECT_NE(fp8.err.find("--dtype: 'fp8' is not one of fp32|tf32|bf16|fp16"), std::string::npos) << fp8.err;
  const auto bad_scale = run_gpt2_train(tiny_flags(dir) + " --dtype fp16 --loss-scale 0");
  EXPECT_EQ(bad_scale.exit_code, 1);
  EXPECT_NE(bad_scale.err.find("--loss-scale"), std::string::npos) << bad_scale.err;
}

}  // namespace
}  // namespace lab
