// Shards for the loader tests: token i of the concatenated stream is i itself (the streams stay below
// 65536 tokens), so a batch's first token says where in the stream it was read, and the reference batch
// for any stream offset is computed without a loader.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "common/data/batch_plan.h"
#include "common/io/shards.h"

namespace lab::testing {

// Writes shards of these sizes into `dir` ("<dir>/<prefix>_000000.bin", ...), together counting 0, 1, 2, ...
inline std::vector<std::string> write_counting_shards(const std::string& dir, const std::vector<int64_t>& sizes,
                                                      const std::string& prefix = "train") {
  std::vector<std::string> paths;
  int64_t next = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint16_t> tokens(static_cast<size_t>(sizes[s]));
    for (uint16_t& t : tokens) t = static_cast<uint16_t>(next++);
    char name[64];
    std::snprintf(name, sizeof(name), "/%s_%06zu.bin", prefix.c_str(), s);
    paths.push_back(dir + name);
    write_shard(paths.back(), tokens);
  }
  EXPECT_LE(next, 65536) << "counting shards must stay below 65536 tokens to keep every token distinct";
  return paths;
}

// The inputs and targets of the B x T batch that starts at `offset` of the counting stream.
struct ReferenceBatch {
  std::vector<int32_t> inputs, targets;
};
inline ReferenceBatch counting_batch(int64_t offset, int64_t batch, int64_t seq) {
  ReferenceBatch r;
  for (int64_t i = 0; i < batch * seq; ++i) {
    r.inputs.push_back(static_cast<int32_t>(offset + i));
    r.targets.push_back(static_cast<int32_t>(offset + i + 1));
  }
  return r;
}

}  // namespace lab::testing
