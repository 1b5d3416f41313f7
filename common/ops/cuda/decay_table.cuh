// Weight decay by ranges on the GPU, for AdamW over a flat buffer (the core's kernel, common/ops/cuda/adamw.cu,
// and chapter 6's flat_adamw): the decayed ranges travel in a kernel's arguments, a table of up to
// kRangesPerLaunch (1 KB of the 4 KB a launch may pass), and a thread finds by binary search whether its element
// lies in one. A buffer with more ranges takes one launch per table, each over its stretch of the buffer: from
// where the previous stretch ended to the first range of the next table (or the end).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ops/element_range.h"

namespace lab::ops::cuda {

inline constexpr int kRangesPerLaunch = 64;

// Sorted, disjoint [begin[r], end[r]) with weight decay.
struct DecayTable {
  int count = 0;
  int64_t begin[kRangesPerLaunch];
  int64_t end[kRangesPerLaunch];
};

// Whether element i lies in one of the table's ranges.
__device__ inline bool decays(const DecayTable& table, int64_t i) {
  int lo = 0, hi = table.count;  // the number of ranges that begin at or before i
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table.begin[mid] <= i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo > 0 && i < table.end[lo - 1];
}

// Calls launch(first, end, table) for each table of `decay` (sorted ranges of a buffer of n elements) with its
// non-empty stretch [first, end); one call with an empty table when there are no ranges.
template <typename Launch>
void for_each_decay_stretch(const std::vector<ElementRange>& decay, int64_t n, Launch&& launch) {
  const size_t ranges = decay.size();
  int64_t first = 0;
  for (size_t r = 0; r == 0 || r < ranges; r += kRangesPerLaunch) {
    DecayTable table;
    for (size_t j = r; j < ranges && j < r + kRangesPerLaunch; ++j, ++table.count) {
      table.begin[table.count] = decay[j].begin;
      table.end[table.count] = decay[j].end;
    }
    const int64_t end = r + kRangesPerLaunch < ranges ? decay[r + kRangesPerLaunch].begin : n;
    if (end > first) launch(first, end, table);
    first = end;
  }
}

}  // namespace lab::ops::cuda
