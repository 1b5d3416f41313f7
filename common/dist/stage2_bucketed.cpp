// Stage 2: all-reduce the flat gradient buffer bucket by bucket (see stage2_bucketed.h).
#include "common/dist/stage2_bucketed.h"

namespace lab::dist {

BucketedAllReduce::BucketedAllReduce(comm::Communicator& group, ParameterStore& params, int64_t bucket_bytes)
    : GradientReducer(group, params), buckets_(make_buckets(params, bucket_bytes)) {}

void BucketedAllReduce::reduce() {
  for (const GradientBucket& b : buckets_) average(group_, params_.grads().view(b.range.begin, {b.range.size()}));
}

}  // namespace lab::dist
