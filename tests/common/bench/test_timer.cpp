// measure(): warm-up and repeats, each repeat timed by the backend it is given.
#include <gtest/gtest.h>

#include "common/bench/timer.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::expect_error;

// A backend that reports a scripted duration per call, to check that measure() returns what it measured.
class ScriptedTiming : public TimingBackend {
 public:
  std::string name() const override { return "scripted"; }
  double time(const std::function<void()>& work) override {
    work();
    return 0.5 * static_cast<double>(++calls);
  }
  int calls = 0;
};

TEST(Timer, MeasureRunsWarmupUntimedThenEachRepeat) {
  int runs = 0;
  ScriptedTiming timing;
  const std::vector<double> seconds = measure([&] { ++runs; }, 2, 3, timing);
  EXPECT_EQ(runs, 5);
  EXPECT_EQ(timing.calls, 3);
  EXPECT_EQ(seconds, (std::vector<double>{0.5, 1.0, 1.5}));
}

TEST(Timer, SteadyClockMeasuresEachRepeat) {
  int runs = 0;
  const std::vector<double> seconds = measure([&] { ++runs; }, 1, 4);
  EXPECT_EQ(runs, 5);
  ASSERT_EQ(seconds.size(), 4u);
  for (double s : seconds) EXPECT_GE(s, 0.0);
  EXPECT_EQ(steady_clock_timing().name(), "steady_clock");
}

TEST(Timer, StopwatchNeverGoesBackwards) {
  Timer timer;
  const double first = timer.seconds();
  const double second = timer.seconds();
  EXPECT_GE(first, 0.0);
  EXPECT_GE(second, first);
}

TEST(Timer, BadRepeatCountsAreErrors) {
  expect_error([] { measure([] {}, -1, 3); }, ErrorKind::InvalidArgument, {"warmup"});
  expect_error([] { measure([] {}, 0, 0); }, ErrorKind::InvalidArgument, {"repeats"});
}

}  // namespace
}  // namespace lab::bench
