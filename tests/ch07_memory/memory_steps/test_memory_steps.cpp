// The trainer's chapter-7 flags in combination (ch10_gpt2/memory_steps.h): what trains is accepted, and each
// combination the rungs cannot train is refused with one error naming the flags.
#include <gtest/gtest.h>

#include "ch10_gpt2/memory_steps.h"
#include "tests/common/expect_error.h"

namespace lab::ch07 {
namespace {

using testing::expect_error;

comm::ParallelLayout layout(int dp, int tp, int pp) {
  comm::ParallelLayout l;
  l.dp = dp;
  l.tp = tp;
  l.pp = pp;
  return l;
}

TEST(MemorySteps, AcceptsWhatTheRungsTrain) {
  EXPECT_NO_THROW(check_memory_steps({}, layout(4, 2, 2)));
  EXPECT_NO_THROW(check_memory_steps({true, false, 0}, layout(1, 1, 1)));
  EXPECT_NO_THROW(check_memory_steps({false, true, 0}, layout(2, 1, 1)));
  EXPECT_NO_THROW(check_memory_steps({false, false, 1}, layout(4, 1, 1)));
  EXPECT_NO_THROW(check_memory_steps({false, false, 2}, layout(1, 1, 1)));
  EXPECT_NO_THROW(check_memory_steps({false, false, 3}, layout(2, 1, 1)));
  EXPECT_NO_THROW(check_memory_steps({false, false, 3, true}, layout(2, 1, 1)));
}

TEST(MemorySteps, RefusesWhatTheyCannotTrain) {
  expect_error(
      [] {
        check_memory_steps({false, false, 4}, layout(2, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--zero 4", "3 (also parameters)"});
  expect_error(
      [] {
        check_memory_steps({false, false, 3}, layout(2, 1, 2));
      },
      ErrorKind::InvalidArgument, {"--zero 3", "--pp"});
  expect_error(
      [] {
        check_memory_steps({false, false, 2, true}, layout(2, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--zero-prefetch", "--zero 3"});
  expect_error(
      [] {
        check_memory_steps({false, false, 1}, layout(2, 2, 1));
      },
      ErrorKind::InvalidArgument, {"--zero 1", "--tp"});
  expect_error(
      [] {
        check_memory_steps({false, false, 2}, layout(2, 1, 2));
      },
      ErrorKind::InvalidArgument, {"--zero 2", "--pp"});
  expect_error(
      [] {
        check_memory_steps({true, false, 1}, layout(2, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--zero", "--optimizer-in-backward"});
  expect_error(
      [] {
        check_memory_steps({false, true, 1}, layout(2, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--offload optimizer", "--zero"});
  expect_error(
      [] {
        check_memory_steps({true, true, 0}, layout(1, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--offload optimizer", "--optimizer-in-backward"});
  expect_error(
      [] {
        check_memory_steps({true, false, 0}, layout(2, 1, 1));
      },
      ErrorKind::InvalidArgument, {"--optimizer-in-backward", "one process"});
}

}  // namespace
}  // namespace lab::ch07
