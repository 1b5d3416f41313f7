// SIGINT and SIGTERM on the real gpt2_train: the run stops after the step in progress, writes its checkpoint,
// says where, and exits 130 or 143; the checkpoint resumes to exactly the losses of an uninterrupted run. A
// second signal stops at once without damaging any checkpoint. A simulated slow source (--slow-read-us) makes
// each step last long enough to be interrupted; it delays batches without changing them.
#include <gtest/gtest.h>

#include <csignal>
#include <regex>

#include "ch10_gpt2/checkpoint.h"
#include "common/io/files.h"
#include "tests/ch10_gpt2/trainer_fixtures.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::BackgroundTrainer;
using testing::logged_losses;
using testing::ProcessResult;
using testing::run_gpt2_train;
using testing::scratch_directory;
using testing::tiny_flags;

// The step N of "interrupted at step N; ..." (-1 when the line is missing).
int64_t interrupted_step(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("interrupted at step ([0-9]+);"))) return -1;
  return std::stoll(m[1].str());
}

class TrainerSignal : public ::testing::TestWithParam<int> {};

TEST_P(TrainerSignal, StopsAfterTheStepSavesAndResumesToTheSameLosses) {
  const int sig = GetParam();
  const std::string dir = scratch_directory();
  const std::string flags = tiny_flags(dir) + " --steps 8 --lr-decay-steps 8";
  const ProcessResult full = run_gpt2_train(flags + " --log-json " + dir + "/full.jsonl");
  ASSERT_EQ(full.exit_code, 0) << full.err;

  BackgroundTrainer run(flags + " --slow-read-us 150000 --save " + dir + "/ckpt --log-json " + dir + "/parts.jsonl");
  ASSERT_TRUE(run.wait_for_output("step     2/8")) << "the run did not reach step 2";
  run.signal(sig);
  const ProcessResult stopped = run.wait();
  EXPECT_EQ(stopped.exit_code, 128 + sig) << stopped.out << stopped.err;
  EXPECT_EQ(stopped.err, "gpt2_train: stopping after the current step (a second signal stops at once)\n");
  const int64_t step = interrupted_step(stopped.out);
  EXPECT_GE(step, 2) << stopped.out;
  EXPECT_LT(step, 8) << stopped.out;
  EXPECT_NE(stopped.out.find("; checkpoint at " + dir + "/ckpt\n"), std::string::npos) << stopped.out;
  EXPECT_EQ(stopped.out.find("done:"), std::string::npos) << stopped.out;
  EXPECT_EQ(read_checkpoint_state(dir + "/ckpt").step, step);
  EXPECT_FALSE(file_exists(dir + "/ckpt.tmp"));

  const ProcessResult resumed = run_gpt2_train(flags + " --resume " + dir + "/ckpt --log-json " + dir + "/parts.jsonl");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::vector<double> expected = logged_losses(dir + "/full.jsonl");
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(logged_losses(dir + "/parts.jsonl"), expected);
}

INSTANTIATE_TEST_SUITE_P(SigintAndSigterm, TrainerSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGINT ? "SIGINT" : "SIGTERM");
                         });

TEST(TrainerSignals, WithoutSaveTheMessageSaysNoCheckpointWasWritten) {
  const std::string dir = scratch_directory();
  BackgroundTrainer run(tiny_flags(dir) + " --steps 20 --slow-read-us 100000");
  ASSERT_TRUE(run.wait_for_output("step     1/20"));
  run.signal(SIGINT);
  const ProcessResult stopped = run.wait();
  EXPECT_EQ(stopped.exit_code, 130);
  EXPECT_NE(stopped.out.find("; no checkpoint written (no --save given)"), std::string::npos) << stopped.out;
}

TEST(TrainerSignals, ASignalDuringAnEvaluationStopsItBetweenTwoBatches) {
  const std::string dir = scratch_directory();
  // 40 validation batches of 100 ms each: seconds of evaluation after every step.
  BackgroundTrainer run(tiny_flags(dir) + " --steps 3 --eval-every 1 --val-batches 40 --slow-read-us 100000 --save " +
                        dir + "/ckpt");
  ASSERT_TRUE(run.wait_for_output("step     1/3"));
  run.signal(SIGINT);
  const ProcessResult stopped = run.wait();
  EXPECT_EQ(stopped.exit_code, 130);
  EXPECT_NE(stopped.out.find("eval      1 | stopped by a signal"), std::string::npos) << stopped.out;
  EXPECT_EQ(stopped.out.find("step     2/3"), std::string::npos) << stopped.out;
  EXPECT_EQ(interrupted_step(stopped.out), 1) << stopped.out;
  EXPECT_EQ(read_checkpoint_state(dir + "/ckpt").step, 1);
}

TEST(TrainerSignals, ASecondSignalStopsAtOnceAndLeavesACompleteCheckpoint) {
  const std::string dir = scratch_directory();
  const std::string flags = tiny_flags(dir) + " --steps 40 --save-every 1 --save " + dir + "/ckpt";
  BackgroundTrainer run(flags + " --slow-read-us 300000");
  ASSERT_TRUE(run.wait_for_output("checkpoint: step 2 saved"));
  run.signal(SIGINT);
  // Once the first is acknowledged, the second arrives while the step (300 ms of reading alone) is running.
  ASSERT_TRUE(run.wait_for_output("stopping after the current step"));
  run.signal(SIGINT);
  const ProcessResult stopped = run.wait();
  EXPECT_EQ(stopped.exit_code, 130);
  EXPECT_EQ(stopped.err,
            "gpt2_train: stopping after the current step (a second signal stops at once)\n"
            "gpt2_train: second signal: stopped at once; any checkpoint written so far is complete\n");
  EXPECT_EQ(interrupted_step(stopped.out), -1) << "the step was not finished:\n" << stopped.out;
  // Whichever save the signal fell into, the checkpoint in place is complete: it resumes, and the next run
  // removes what the abandoned save may have left, saying so.
  const int64_t step = read_checkpoint_state(dir + "/ckpt").step;
  EXPECT_GE(step, 2);
  const ProcessResult resumed =
      run_gpt2_train(flags + " --resume " + dir + "/ckpt --steps " + std::to_string(step + 1));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(read_checkpoint_state(dir + "/ckpt").step, step + 1);
  EXPECT_FALSE(file_exists(dir + "/ckpt.tmp"));
}

}  // namespace
}  // namespace lab
