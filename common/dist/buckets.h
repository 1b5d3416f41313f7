// Gradient buckets: the flat gradient buffer cut into consecutive ranges of whole parameters, each at most
// `bucket_bytes` (a parameter larger than that is a bucket of its own), as PyTorch DDP's bucket_cap_mb.
//
// The buffer is in backward order (common/nn/parameters.h), so bucket 0 holds the gradients backward
// finishes first (GPT-2: ln_f and the last block) and the last bucket the ones it finishes last (wte). Each
// bucket's range runs from its first parameter to the next bucket's first (the alignment padding between
// parameters included: it is zero on every rank), the last bucket's to the end of the buffer, so the buckets
// tile the buffer exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/nn/parameters.h"

namespace lab::dist {

struct GradientBucket {
  ElementRange range;          // of the flat gradient buffer
  std::vector<size_t> params;  // its parameters, as indices into ParameterStore::infos(), in buffer order
};

// InvalidArgument unless bucket_bytes > 0.
std::vector<GradientBucket> make_buckets(const ParameterStore& params, int64_t bucket_bytes);

// The buffer cut into buckets the same way, with a new bucket started before each parameter (in buffer order)
// for which `starts_bucket(current, next)` holds: `current` is the bucket being filled (its range's end not
// set yet), `next` the parameter that would join it. make_buckets cuts at the byte cap; ZeRO stage 3 (chapter
// 7) at the boundaries of transformer blocks.
std::vector<GradientBucket> cut_buckets(
    const ParameterStore& params,
    const std::function<bool(const GradientBucket& current, const ParamInfo& next)>& starts_bucket);

}  // namespace lab::dist
