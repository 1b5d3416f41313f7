// Statistics of repeated measurements, and the rule for claiming a gain: the difference of the medians
// must be larger than the spread (max - min) of either sample. Anything smaller could be noise, so it is
// reported as "within spread" rather than as a gain or a regression.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace lab::bench {

struct Summary {
  int64_t count = 0;
  double median = 0;  // the middle value; the mean of the two middle values for an even count
  double min = 0;
  double max = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1); 0 for a single value

  double spread() const { return max - min; }
};

// Error(InvalidArgument) for an empty sample.
Summary summarize(std::span<const double> samples);
double median(std::span<const double> samples);

// Whether a smaller or a larger value of a metric is the better one (seconds vs tokens per second).
enum class Better { Lower, Higher };
const char* better_name(Better better);      // "lower", "higher"
Better parse_better(std::string_view name);  // Error(Format) for anything else

enum class Verdict { Gain, Regression, WithinSpread };
const char* verdict_name(Verdict verdict);  // "gain", "regression", "within spread"

struct Comparison {
  double ratio = 0;  // after.median / before.median (NaN when before.median is 0)
  Verdict verdict = Verdict::WithinSpread;
};

// Compares `after` with `before`: a gain or a regression only when the medians differ by more than the
// larger of the two spreads.
Comparison compare(const Summary& before, const Summary& after, Better better);

// True when `after` is better than `before` by more than the spread.
inline bool gain_exceeds_spread(const Summary& before, const Summary& after, Better better = Better::Lower) {
  return compare(before, after, better).verdict == Verdict::Gain;
}

}  // namespace lab::bench
