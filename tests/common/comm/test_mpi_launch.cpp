// How an mpirun job ends when a rank fails: whole jobs of mpi_failing_rank, launched and watched from
// outside. A job whose rank throws or dies must end at once (mpirun stops the other ranks, which are
// waiting for it), not after the others' timeout of 100 s; a rank that never arrives makes the others time
// out with an error naming the operation; a program started without mpirun is one rank. Each job runs
// under a 60 s watchdog (coreutils' timeout, exit status 124): a job still running then is a hang, reported
// as such, not a slow machine (these jobs take about 2 s).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "common/core/error.h"

namespace lab::comm {
namespace {

struct Finished {
  int exit_code = -1;
  std::string output;  // stdout and stderr of every rank and of mpirun
};

Finished run(const std::string& command) {
  Finished finished;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return finished;
  char chunk[4096];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) finished.output.append(chunk, n);
  const int status = pclose(pipe);
  finished.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return finished;
}

constexpr int kHung = 124;  // timeout's exit status when the watchdog ended the job

// mpirun needs two variables to run as root; leak checking is off in the ranks under AddressSanitizer
// (Open MPI's own leaks at exit, see cmake/lab_mpi.cmake).
std::string under_mpirun(int ranks, const std::string& arguments) {
  return cat("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" ",
             "timeout --kill-after=5 60 ", LAB_MPIEXEC, " -n ", ranks, " --oversubscribe --bind-to none ",
             LAB_FAILING_RANK, " ", arguments);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MpiLaunch, WhenEveryRankArrivesTheJobSucceeds) {
  const Finished job = run(under_mpirun(2, "none 60000"));
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1/2 started (mpi)")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 0: sum 3")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1: sum 3")) << job.output;
}

// The survivors wait in the all-reduce with a timeout of 100 s; the job ends long before, by mpirun.
TEST(MpiLaunch, ARankThatThrowsEndsTheJobWithItsError) {
  const Finished job = run(under_mpirun(3, "throw 100000"));
  EXPECT_NE(job.exit_code, kHung) << "the job still ran after 60 s:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_TRUE(contains(job.output, "mpi_failing_rank: error: rank 1 could not read its data shard")) << job.output;
  EXPECT_FALSE(contains(job.output, "timed out")) << job.output;
  EXPECT_FALSE(contains(job.output, "sum")) << job.output;
}

TEST(MpiLaunch, ARankThatDiesEndsTheJob) {
  const Finished job = run(under_mpirun(3, "kill 100000"));
  EXPECT_NE(job.exit_code, kHung) << "the job still ran after 60 s:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_FALSE(contains(job.output, "timed out")) << job.output;
  EXPECT_FALSE(contains(job.output, "sum")) << job.output;
}

TEST(MpiLaunch, ARankThatNeverArrivesMakesTheOthersTimeOut) {
  const Finished job = run(under_mpirun(3, "late 500"));
  EXPECT_NE(job.exit_code, kHung) << "the job still ran after 60 s:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_TRUE(contains(job.output, "[mpi] all_reduce #1: timed out after 500 ms waiting for all 3 ranks to call it"))
      << job.output;
  EXPECT_FALSE(contains(job.output, "rank 1 woke up")) << job.output;
}

TEST(MpiLaunch, WithoutMpirunTheProgramIsOneRank) {
  const Finished job = run(LAB_FAILING_RANK " none 1000");
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 0/1 started (single)")) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 0: sum 1")) << job.output;
}

}  // namespace
}  // namespace lab::comm
