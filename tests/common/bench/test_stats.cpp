// Sample statistics and the gain-versus-spread rule.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/bench/stats.h"
#include "tests/common/expect_error.h"

namespace lab::bench {
namespace {

using lab::testing::expect_error;

TEST(Stats, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(median(std::vector<double>{5, 1, 3}), 3);
  EXPECT_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median(std::vector<double>{7}), 7);
}

TEST(Stats, SummaryOfASample) {
  const Summary s = summarize(std::vector<double>{2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.count, 8);
  EXPECT_EQ(s.median, 4.5);
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.mean, 5);
  EXPECT_NEAR(s.stddev, std::sqrt(32.0 / 7.0), 1e-12);  // sum of squared deviations is 32, n - 1 = 7
  EXPECT_EQ(s.spread(), 7);
}

TEST(Stats, SingleValueHasNoSpread) {
  const Summary s = summarize(std::vector<double>{0.25});
  EXPECT_EQ(s.median, 0.25);
  EXPECT_EQ(s.stddev, 0);
  EXPECT_EQ(s.spread(), 0);
}

TEST(Stats, EmptySampleIsAnError) {
  expect_error([] { summarize(std::vector<double>{}); }, ErrorKind::InvalidArgument, {"empty"});
  expect_error([] { median(std::vector<double>{}); }, ErrorKind::InvalidArgument, {"empty"});
}

TEST(Stats, GainOnlyBeyondTheSpread) {
  const Summary before = summarize(std::vector<double>{10, 11, 12});  // spread 2
  const Summary faster = summarize(std::vector<double>{7, 7.5, 8});   // median 7.5: 3.5 lower
  const Summary close = summarize(std::vector<double>{9, 9.5, 10});   // median 9.5: 1.5 lower, within 2

  const Comparison gain = compare(before, faster, Better::Lower);
  EXPECT_EQ(gain.verdict, Verdict::Gain);
  EXPECT_DOUBLE_EQ(gain.ratio, 7.5 / 11);
  EXPECT_TRUE(gain_exceeds_spread(before, faster));

  EXPECT_EQ(compare(before, close, Better::Lower).verdict, Verdict::WithinSpread);
  EXPECT_FALSE(gain_exceeds_spread(before, close));

  EXPECT_EQ(compare(faster, before, Better::Lower).verdict, Verdict::Regression);
  EXPECT_FALSE(gain_exceeds_spread(faster, before));
}

TEST(Stats, TheLargerSpreadDecides) {
  const Summary before = summarize(std::vector<double>{10, 10, 10});     // no spread
  const Summary noisy_after = summarize(std::vector<double>{5, 8, 14});  // 2 lower, but a spread of 9
  EXPECT_EQ(compare(before, noisy_after, Better::Lower).verdict, Verdict::WithinSpread);
}

TEST(Stats, HigherIsBetterForThroughput) {
  const Summary before = summarize(std::vector<double>{100, 101, 102});
  const Summary after = summarize(std::vector<double>{150, 151, 152});
  EXPECT_EQ(compare(before, after, Better::Higher).verdict, Verdict::Gain);
  EXPECT_EQ(compare(before, after, Better::Lower).verdict, Verdict::Regression);
  EXPECT_TRUE(gain_exceeds_spread(before, after, Better::Higher));
}

TEST(Stats, RatioAgainstZeroIsNotANumber) {
  const Summary zero = summarize(std::vector<double>{0});
  const Summary one = summarize(std::vector<double>{1});
  EXPECT_TRUE(std::isnan(compare(zero, one, Better::Lower).ratio));
}

TEST(Stats, BetterNames) {
  EXPECT_EQ(parse_better("lower"), Better::Lower);
  EXPECT_EQ(parse_better(better_name(Better::Higher)), Better::Higher);
  expect_error([] { parse_better("faster"); }, ErrorKind::Format, {"faster"});
}

}  // namespace
}  // namespace lab::bench
