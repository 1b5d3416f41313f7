// Data parallelism's training step under mpirun (2 and 4 ranks), every stage against one process: each rank
// trains a small GPT-2 for 5 steps on its share of fixed global batches, and also, alone, on the whole global
// batches; the losses, gradient norms and final weights must agree, with and without gradient accumulation and
// clipping. The overlapped stage must start every bucket's all-reduce during backward (counted, not timed), and
// the ranks must have made the same collectives (their sequence numbers agree).
#include <gtest/gtest.h>

#include "common/dist/data_parallel_step.h"
#include "common/dist/stage3_overlapped.h"
#include "tests/ch08_distributed/dp_test_support.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::ch08 {

// Data parallelism's machinery lives in common/dist.
using dist::DataParallelStep;
using dist::dp_stage_name;
using dist::DpStage;
using dist::GradientReducer;
using dist::OverlappedAllReduce;
using dist::ReductionStats;

namespace {

using testing::DpRunResult;
using testing::DpRunSettings;

struct DpCase {
  DpStage stage;
  int64_t accum_steps;
  double grad_clip;
  std::string name() const {
    return cat(dp_stage_name(stage), "_accum", accum_steps, grad_clip > 0 ? "_clipped" : "_unclipped");
  }
};

class DataParallelStepTest : public ::testing::TestWithParam<DpCase> {};

// Small buckets, so that the model (65k parameters, 256 KB of gradients) has several.
constexpr int64_t kBucketBytes = 16 << 10;

TEST_P(DataParallelStepTest, TrainsAsOneProcessOnTheGlobalBatch) {
  const DpCase c = GetParam();
  const std::unique_ptr<comm::Communicator> group = testing::fresh_communicator();
  const int ranks = group->size(), rank = group->rank();
  DpRunSettings s;
  s.accum_steps = c.accum_steps;
  s.grad_clip = c.grad_clip;  // 0.5: below every step's norm here, so clipping acts on every step
  const std::vector<MicroBatch> global = testing::global_micro_batches(s, ranks);

  const DpRunResult reference = testing::train_small(s, global, [](GPT2& model, AdamW& opt, TrainStepConfig config) {
    return std::make_unique<TrainStep>(model, opt, config);
  });
  std::vector<MicroBatch> mine;
  for (const MicroBatch& b : global) mine.push_back(testing::share_of(b, rank, s.rows));
  ReductionStats stats;
  size_t buckets = 0;
  const DpRunResult got = testing::train_small(
      s, mine,
      [&](GPT2& model, AdamW& opt, TrainStepConfig config) {
        return std::make_unique<DataParallelStep>(*group, c.stage, kBucketBytes, model, opt, config);
      },
      [&](const TrainStep& step) {
        const GradientReducer& reducer = dynamic_cast<const DataParallelStep&>(step).reducer();
        stats = reducer.stats();
        if (const auto* overlapped = dynamic_cast<const OverlappedAllReduce*>(&reducer))
          buckets = overlapped->buckets().size();
      });
  testing::expect_same_run(got, reference, c.name());
  if (c.grad_clip > 0) {
    for (double norm : reference.grad_norms) ASSERT_GT(norm, c.grad_clip) << "the case must clip";
  }

  // The last step's reduction: every gradient byte once; the naive stage sends the tensors, the buckets
  // the whole buffer (the alignment padding between tensors included).
  const GPT2 shape(testing::dp_test_config(), Device::cpu());
  int64_t tensor_bytes = 0;
  for (const ParamInfo& p : shape.parameters().infos()) tensor_bytes += p.numel() * 4;
  if (c.stage == DpStage::Naive) {
    EXPECT_EQ(stats.bytes, tensor_bytes);
    EXPECT_EQ(stats.collectives, 2 + 12 * 4 + 2);  // one per tensor: wte, wpe, 12 per block (4 blocks), ln_f
  } else {
    EXPECT_EQ(stats.bytes, shape.parameters().numel() * 4);
  }
  if (c.stage == DpStage::Overlap) {
    EXPECT_GE(buckets, 3u);
    EXPECT_EQ(stats.started_during_backward, static_cast<int64_t>(buckets))
        << "every bucket's all-reduce must start from a gradient hook, before backward ends";
    EXPECT_EQ(stats.collectives, static_cast<int64_t>(buckets));
  }

  // Every rank made the same collectives on the group.
  const Tensor sequences = Tensor::empty({ranks}, DType::I32);
  const Tensor mine_seq = Tensor::empty({1}, DType::I32);
  mine_seq.data<int32_t>()[0] = static_cast<int32_t>(group->sequence());
  group->all_gather(mine_seq, sequences);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(sequences.data<int32_t>()[r], static_cast<int32_t>(group->sequence()) - 1);
}

std::vector<DpCase> cases() {
  std::vector<DpCase> all;
  for (const DpStage stage : {DpStage::Naive, DpStage::Bucketed, DpStage::Overlap}) {
    all.push_back({stage, 1, 0.0});
    all.push_back({stage, 2, 0.5});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Stages, DataParallelStepTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<DpCase>& info) { return info.param.name(); });

}  // namespace
}  // namespace lab::ch08
