// gpt2_train's memory flags on a tiny model (in process; the last test runs the program): every step's log line carries
// mem_peak_by_category (each category's peak at most the step's total peak, which is at most their sum),
// --memory-snapshot writes the first step's timeline whose peak is that step's logged peak, --recompute block logs
// bitwise the losses of no recompute, a snapshot path holding a user's file is refused before any work, and
// --find-max-batch prints only its search. --zero 3 in one process (its whole machinery, over one rank) logs
// the losses of the ordinary step, saves a checkpoint that resumes, and refuses mixed precision.
#include <gtest/gtest.h>

#include "ch07_memory/memory_snapshot.h"
#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

// The step records of a log (evaluations and the header left out).
std::vector<Json> step_records(const std::string& path) {
  std::vector<Json> steps;
  for (const Json& rec : testing::read_log(path))
    if (rec.contains("loss")) steps.push_back(rec);
  return steps;
}

TEST(TrainerMemory, LogsPeaksByCategoryAndWritesTheFirstStepsSnapshot) {
  const std::string dir = testing::scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  o.steps = 3;
  o.eval_every = 0;
  o.val_batches = 1;
  o.log_json = dir + "/log.jsonl";
  o.memory_snapshot = dir + "/snapshot.json";
  o.memory_report = true;
  Trainer(o).run();
  const std::vector<Json> steps = step_records(o.log_json);
  ASSERT_EQ(steps.size(), 3u);
  for (const Json& rec : steps) {
    const Json& by_category = rec.at("mem_peak_by_category");
    const int64_t peak = rec.at("mem_peak_bytes").as_int();
    int64_t sum = 0;
    for (const char* key : {"params", "grads", "optimizer", "activations", "workspace", "comm", "other"}) {
      const int64_t c = by_category.at(key).as_int();
      EXPECT_LE(c, peak) << key;
      sum += c;
    }
    EXPECT_LE(peak, sum);
    EXPECT_GT(by_category.at("activations").as_int(), 0);
  }
  const Json snapshot = Json::parse(read_file(o.memory_snapshot));
  EXPECT_EQ(snapshot.at("allocator_peak").as_int(), steps[0].at("mem_peak_bytes").as_int());
  EXPECT_GT(snapshot.at("events").size(), 0u);
}

TEST(TrainerMemory, BlockRecomputeLogsTheLossesOfNone) {
  const std::string dir = testing::scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  o.steps = 3;
  o.eval_every = 0;
  o.val_batches = 1;
  o.log_json = dir + "/none.jsonl";
  Trainer(o).run();
  o.log_json = dir + "/block.jsonl";
  o.recompute = "block";
  Trainer(o).run();
  const std::vector<Json> none = step_records(dir + "/none.jsonl"), block = step_records(dir + "/block.jsonl");
  ASSERT_EQ(none.size(), block.size());
  for (size_t i = 0; i < none.size(); ++i) {
    EXPECT_EQ(block[i].at("loss").as_number(), none[i].at("loss").as_number()) << i;
    EXPECT_LT(block[i].at("mem_peak_by_category").at("activations").as_int(),
              none[i].at("mem_peak_by_category").at("activations").as_int());
  }
}

TEST(TrainerMemory, RefusesToOverwriteAUsersFileWithASnapshot) {
  const std::string dir = testing::scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  o.memory_snapshot = dir + "/notes.txt";
  write_file_atomic(o.memory_snapshot, "my notes");
  testing::expect_error([&] { Trainer t(o); }, ErrorKind::Io, {"--memory-snapshot", "notes.txt"});
  EXPECT_EQ(read_file(o.memory_snapshot), "my notes");
}

TEST(TrainerMemory, ZeroStage3InOneProcessTrainsAsTheOrdinaryStepAndResumes) {
  const std::string dir = testing::scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  o.steps = 4;
  o.eval_every = 2;
  o.val_batches = 1;
  o.log_json = dir + "/plain.jsonl";
  Trainer(o).run();
  o.zero = 3;
  o.log_json = dir + "/zero3.jsonl";
  Trainer(o).run();
  o.steps = 2;
  o.save = dir + "/checkpoint";
  o.log_json = dir + "/saved.jsonl";
  Trainer(o).run();
  o.steps = 4;
  o.save = "";
  o.resume = dir + "/checkpoint";
  o.log_json = dir + "/resumed.jsonl";
  Trainer(o).run();
  const std::vector<Json> plain = step_records(dir + "/plain.jsonl"), zero3 = step_records(dir + "/zero3.jsonl"),
                          resumed = step_records(dir + "/resumed.jsonl");
  ASSERT_EQ(plain.size(), 4u);
  ASSERT_EQ(zero3.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(zero3[i].at("loss").as_number(), plain[i].at("loss").as_number(), 1e-5) << "step " << i + 1;
  for (size_t i = 0; i < resumed.size(); ++i)
    EXPECT_NEAR(resumed[i].at("loss").as_number(), plain[i + 2].at("loss").as_number(), 1e-5) << "step " << i + 3;
}

TEST(TrainerMemory, ZeroStage3RefusesMixedPrecision) {
  const std::string dir = testing::scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  o.zero = 3;
  o.dtype = "bf16";
  testing::expect_error([&] { Trainer t(o); }, ErrorKind::Unsupported, {"--dtype bf16 with --zero 3"});
}

// The search is all such a run does: it prints its answer and no training summary (no "done: 0 steps ... nan").
TEST(TrainerMemory, FindMaxBatchPrintsTheSearchAndNoTrainingSummary) {
  const std::string dir = testing::scratch_directory();
  const testing::ProcessResult r =
      testing::run_gpt2_train(testing::tiny_flags(dir) + " --find-max-batch --memory-budget 96MiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--find-max-batch: seq 16"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("done:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lab
