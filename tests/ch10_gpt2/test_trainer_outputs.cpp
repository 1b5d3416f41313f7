// The trainer's outputs: --save writes only where nothing is or an earlier checkpoint is, and every output
// path is checked before the first step, so a bad one costs no training and destroys nothing.
#include <gtest/gtest.h>

#include <algorithm>

#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/trainer.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::ProcessResult;
using testing::run_gpt2_train;
using testing::run_program;
using testing::scratch_directory;
using testing::tiny_flags;

// A refused run: exit 1, one error line naming `expected`, and not a single training step printed.
void expect_refused_before_training(const ProcessResult& r, const std::string& expected) {
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained before refusing:\n" << r.out;
}

TEST(TrainerSave, RefusesANonEmptyDirectoryThatIsNotACheckpoint) {
  const std::string dir = scratch_directory();
  make_directories(dir + "/mine");
  write_file_atomic(dir + "/mine/important.txt", "x\n");
  expect_refused_before_training(run_gpt2_train(tiny_flags(dir) + " --steps 1 --save " + dir + "/mine"),
                                 "--save: refusing to write the gpt2-labs checkpoint '" + dir +
                                     "/mine': it is not empty and has no gpt2-labs checkpoint marker (it holds "
                                     "important.txt)");
  EXPECT_EQ(read_file(dir + "/mine/important.txt"), "x\n");
  EXPECT_FALSE(file_exists(dir + "/mine.tmp"));
}

TEST(TrainerSave, RefusesAnOrdinaryFile) {
  const std::string dir = scratch_directory();
  write_file_atomic(dir + "/afile", "my notes\n");
  expect_refused_before_training(run_gpt2_train(tiny_flags(dir) + " --steps 1 --save " + dir + "/afile"),
                                 "it is a file, not a directory");
  EXPECT_EQ(read_file(dir + "/afile"), "my notes\n");
}

TEST(TrainerSave, RefusesACheckpointHoldingAFileAddedByAUser) {
  const std::string dir = scratch_directory();
  ASSERT_EQ(run_gpt2_train(tiny_flags(dir) + " --steps 1 --save " + dir + "/ckpt").exit_code, 0);
  write_file_atomic(dir + "/ckpt/notes.txt", "results of the run\n");
  const std::string state = read_file(dir + "/ckpt/state.json");
  expect_refused_before_training(run_gpt2_train(tiny_flags(dir) + " --steps 2 --save " + dir + "/ckpt"),
                                 "not part of the gpt2-labs checkpoint written there (notes.txt)");
  EXPECT_EQ(read_file(dir + "/ckpt/notes.txt"), "results of the run\n");
  EXPECT_EQ(read_file(dir + "/ckpt/state.json"), state);
}

TEST(TrainerSave, ReplacesAnEarlierCheckpointAndAcceptsAnEmptyDirectory) {
  const std::string dir = scratch_directory();
  make_directories(dir + "/empty");
  const ProcessResult first = run_gpt2_train(tiny_flags(dir) + " --steps 1 --save " + dir + "/empty");
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(read_checkpoint_state(dir + "/empty").step, 1);
  const ProcessResult second = run_gpt2_train(tiny_flags(dir) + " --steps 2 --save " + dir + "/empty");
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(read_checkpoint_state(dir + "/empty").step, 2);
}

TEST(TrainerSave, UnwritableOutputsAreRefusedBeforeTheFirstStep) {
  const std::string dir = scratch_directory();
  const std::string flags = tiny_flags(dir) + " --steps 1";
  expect_refused_before_training(run_gpt2_train(flags + " --save /proc/forbidden"),
                                 "--save: cannot write '/proc/forbidden'");
  expect_refused_before_training(run_gpt2_train(flags + " --save ."), "--save: the gpt2-labs checkpoint path '.'");
  expect_refused_before_training(run_gpt2_train(flags + " --save " + dir + "/"),
                                 "--save: refusing to write the gpt2-labs checkpoint '" + dir + "'");
  expect_refused_before_training(run_gpt2_train(flags + " --log-json /proc/forbidden.jsonl"),
                                 "--log-json: cannot write '/proc/forbidden.jsonl'");
  expect_refused_before_training(run_gpt2_train(flags + " --log-json " + dir), "--log-json: cannot write");
  write_file_atomic(dir + "/results.csv", "a,b\n1,2\n");
  expect_refused_before_training(run_gpt2_train(flags + " --log-json " + dir + "/results.csv"),
                                 "--log-json: refusing to overwrite");
  EXPECT_EQ(read_file(dir + "/results.csv"), "a,b\n1,2\n");
}

TEST(TrainerSave, AStaleTemporaryDirectoryIsRemovedAndSaidSo) {
  // What a save killed half way leaves: "<dir>.tmp" with the marker and part of the files.
  const std::string dir = scratch_directory();
  const std::string stale = dir + "/ckpt.tmp";
  make_directories(stale);
  write_file_atomic(stale + "/" + AtomicDirectory::kMarkerName, std::string(kCheckpointKind) + "\n");
  write_file_atomic(stale + "/model.safetensors", "half of the weights");
  const ProcessResult r = run_gpt2_train(tiny_flags(dir) + " --steps 1 --save " + dir + "/ckpt");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--save: removed '" + stale + "', left by an interrupted save"), std::string::npos) << r.out;
  EXPECT_FALSE(file_exists(stale));
  EXPECT_EQ(read_checkpoint_state(dir + "/ckpt").step, 1);
}

TEST(TrainerSave, TheTrainerAsALibraryRefusesBeforeReadingData) {
  // The same rule when the Trainer is used as a library: the constructor refuses, before reading any data.
  const std::string dir = scratch_directory();
  TrainOptions o = testing::tiny_options(dir);
  make_directories(dir + "/mine");
  write_file_atomic(dir + "/mine/a.txt", "a");
  o.save = dir + "/mine";
  o.data_train = dir + "/no_such_shards_*.bin";  // would fail later: the save check comes first
  testing::expect_error([&] { Trainer t(o); }, ErrorKind::Io, {"--save", "a.txt"});
  EXPECT_EQ(read_file(dir + "/mine/a.txt"), "a");
}

TEST(StepBench, AnUnwritableJsonIsRefusedBeforeTheFirstStep) {
  const std::string dir = scratch_directory();
  const ProcessResult r = run_program("gpt2_step_bench", "--model tiny --steps 1 --json /proc/forbidden.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot write '/proc/forbidden.json'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step 1"), std::string::npos) << r.out;
  write_file_atomic(dir + "/notes.json", "{\"mine\": true}\n");
  const ProcessResult foreign = run_program("gpt2_step_bench", "--model tiny --steps 1 --json " + dir + "/notes.json");
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_NE(foreign.err.find("refusing to overwrite"), std::string::npos) << foreign.err;
  EXPECT_EQ(read_file(dir + "/notes.json"), "{\"mine\": true}\n");
}

}  // namespace
}  // namespace lab
