// Data parallelism, stage 2: bucketed. After backward, the flat gradient buffer is all-reduced in buckets of
// --bucket-mb (25 MB by default, as PyTorch DDP): a few large collectives instead of one per tensor.
//
// What changes from stage 1: gradients are not tensors to the communicator any more, but ranges of one flat
// buffer (the parameter store lays every gradient out in one buffer, common/nn/parameters.h). GPT-2 d12's
// 148 tensors (498 MB of fp32 gradients) become 20 all-reduces of about 25 MB, each long enough to run at the
// link's bandwidth rather than at its latency. The buffer is laid out in backward order, so each bucket holds
// the gradients of neighbouring layers, which stage 3 needs: there, a bucket is sent as soon as the layers it
// holds have finished backward.
//
// Why not one bucket of the whole buffer: then nothing could start before backward ends (stage 3), and the
// largest collectives gain little more bandwidth than 25 MB ones. Why not tiny buckets: latency again.
//
// When not to use it: when stage 3 can run, which is nearly always on GPUs (NCCL on its own stream). Stage 2
// is the better choice where communication cannot proceed beside computation: CPU ranks whose cores are all
// busy with backward (as on this project's 2-core CI machine, see the chapter README), or a network library
// that only progresses inside its calls.
#pragma once

#include <vector>

#include "common/dist/buckets.h"
#include "common/dist/gradient_reducer.h"

namespace lab::dist {

class BucketedAllReduce : public GradientReducer {
 public:
  BucketedAllReduce(comm::Communicator& group, ParameterStore& params, int64_t bucket_bytes);

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

 protected:
  void reduce() override;

 private:
  std::vector<GradientBucket> buckets_;
};

}  // namespace lab::dist
