// Cutting the flat gradient buffer into buckets (see buckets.h).
#include "common/dist/buckets.h"

#include <algorithm>

namespace lab::dist {

std::vector<GradientBucket> make_buckets(const ParameterStore& params, int64_t bucket_bytes) {
  LAB_CHECK(bucket_bytes > 0, InvalidArgument, "gradient buckets must hold at least one byte, got ", bucket_bytes);
  const int64_t cap = std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)));  // in elements
  // A new bucket when this parameter would take the current one past the cap.
  return cut_buckets(params, [cap](const GradientBucket& current, const ParamInfo& next) {
    return next.offset + next.numel() - current.range.begin > cap;
  });
}

std::vector<GradientBucket> cut_buckets(
    const ParameterStore& params,
    const std::function<bool(const GradientBucket& current, const ParamInfo& next)>& starts_bucket) {
  const std::vector<ParamInfo>& infos = params.infos();
  std::vector<size_t> in_buffer_order(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) in_buffer_order[i] = i;
  std::sort(in_buffer_order.begin(), in_buffer_order.end(),
            [&](size_t a, size_t b) { return infos[a].offset < infos[b].offset; });

  std::vector<GradientBucket> buckets;
  for (const size_t i : in_buffer_order) {
    const ParamInfo& p = infos[i];
    if (buckets.empty() || starts_bucket(buckets.back(), p)) {
      if (!buckets.empty()) buckets.back().range.end = p.offset;
      buckets.push_back({{p.offset, p.offset}, {}});
    }
    buckets.back().params.push_back(i);
  }
  if (!buckets.empty()) buckets.back().range.end = params.numel();
  return buckets;
}

}  // namespace lab::dist
