// Character-class lookup over the generated run table, with a direct table for ASCII, which is most text.
#include "common/text/unicode_class.h"

#include <algorithm>
#include <array>

namespace lab::text {

namespace {

CharClass lookup_runs(char32_t cp) {
  const CharClassRun* end = kCharClassRuns + kCharClassRunCount;
  // The last run whose first code point is <= cp; the table starts at U+0000, so there always is one.
  const CharClassRun* after =
      std::upper_bound(kCharClassRuns, end, cp, [](char32_t c, const CharClassRun& run) { return c < run.first; });
  return (after - 1)->cls;
}

const std::array<CharClass, 128> kAsciiClasses = [] {
  std::array<CharClass, 128> table{};
  for (char32_t c = 0; c < 128; ++c) table[c] = lookup_runs(c);
  return table;
}();

}  // namespace

CharClass char_class(char32_t cp) {
  return cp < 128 ? kAsciiClasses[cp] : lookup_runs(cp);
}

}  // namespace lab::text
