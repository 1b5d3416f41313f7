// Gradient buckets over GPT-2's backward-ordered buffer: they tile the buffer exactly, hold whole parameters
// in buffer order, stay within the cap unless one parameter alone exceeds it, and the first holds the
// gradients backward finishes first (ln_f, the last block) while wte, finished last, is in the last.
#include <gtest/gtest.h>

#include "common/dist/buckets.h"
#include "common/nn/gpt2.h"
#include "tests/common/expect_error.h"

namespace lab::ch08 {

// Data parallelism's machinery lives in common/dist.
using dist::GradientBucket;
using dist::make_buckets;

namespace {

TEST(GradientBuckets, TileTheBufferWithWholeParametersInBackwardOrder) {
  const GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  const ParameterStore& params = model.parameters();
  for (const int64_t cap_bytes : {int64_t{1}, int64_t{4096}, int64_t{64} << 10, int64_t{1} << 20, int64_t{1} << 30}) {
    const std::vector<GradientBucket> buckets = make_buckets(params, cap_bytes);
    ASSERT_FALSE(buckets.empty());
    EXPECT_EQ(buckets.front().range.begin, 0);
    EXPECT_EQ(buckets.back().range.end, params.numel());
    size_t params_seen = 0;
    int64_t previous_offset = -1;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const GradientBucket& bucket = buckets[b];
      if (b > 0) {
        EXPECT_EQ(bucket.range.begin, buckets[b - 1].range.end) << "cap " << cap_bytes;
      }
      ASSERT_FALSE(bucket.params.empty());
      EXPECT_EQ(params.infos()[bucket.params.front()].offset, bucket.range.begin);
      int64_t payload = 0;
      for (const size_t p : bucket.params) {
        const ParamInfo& info = params.infos()[p];
        EXPECT_GT(info.offset, previous_offset) << "buffer order";
        previous_offset = info.offset;
        EXPECT_LE(info.offset + info.numel(), bucket.range.end) << info.name << " crosses its bucket's end";
        payload = info.offset + info.numel() - bucket.range.begin;
        ++params_seen;
      }
      if (bucket.params.size() > 1) {
        EXPECT_LE(payload * 4, cap_bytes) << "a bucket of several parameters over the cap";
      }
    }
    EXPECT_EQ(params_seen, params.infos().size());
  }

  const std::vector<GradientBucket> buckets = make_buckets(params, 64 << 10);
  EXPECT_EQ(params.infos()[buckets.front().params.front()].name, "ln_f.bias");
  EXPECT_EQ(params.infos()[buckets.back().params.back()].name, "wte.weight");
  EXPECT_EQ(buckets.back().params.size(), 1u) << "wte (12.9 MB) is larger than the cap: a bucket of its own";
  EXPECT_EQ(make_buckets(params, int64_t{1} << 30).size(), 1u);
  EXPECT_EQ(make_buckets(params, 1).size(), params.infos().size());
  testing::expect_error([&] { make_buckets(params, 0); }, ErrorKind::InvalidArgument, {"bucket"});
}

}  // namespace
}  // namespace lab::ch08
