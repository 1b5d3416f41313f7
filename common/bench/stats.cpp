// Sample statistics and the gain-versus-spread rule.
#include "common/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "common/core/error.h"

namespace lab::bench {

double median(std::span<const double> samples) {
  LAB_CHECK(!samples.empty(), InvalidArgument, "median of an empty sample");
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

Summary summarize(std::span<const double> samples) {
  LAB_CHECK(!samples.empty(), InvalidArgument, "summary of an empty sample");
  Summary s;
  s.count = static_cast<int64_t>(samples.size());
  s.median = median(samples);
  s.min = *std::min_element(samples.begin(), samples.end());
  s.max = *std::max_element(samples.begin(), samples.end());
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / static_cast<double>(s.count);
  if (s.count > 1) {
    double squares = 0;
    for (double x : samples) squares += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(squares / static_cast<double>(s.count - 1));
  }
  return s;
}

const char* better_name(Better better) {
  return better == Better::Lower ? "lower" : "higher";
}

Better parse_better(std::string_view name) {
  if (name == "lower") return Better::Lower;
  if (name == "higher") return Better::Higher;
  fail(ErrorKind::Format, "'better' must be \"lower\" or \"higher\", got \"", name, "\"");
}

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Gain: return "gain";
    case Verdict::Regression: return "regression";
    case Verdict::WithinSpread: return "within spread";
  }
  return "?";
}

Comparison compare(const Summary& before, const Summary& after, Better better) {
  Comparison c;
  c.ratio = before.median != 0 ? after.median / before.median : std::numeric_limits<double>::quiet_NaN();
  const double change = after.median - before.median;
  if (std::fabs(change) <= std::max(before.spread(), after.spread())) return c;
  const bool lower = change < 0;
  c.verdict = lower == (better == Better::Lower) ? Verdict::Gain : Verdict::Regression;
  return c;
}

}  // namespace lab::bench
