// ZeRO stages 1, 2 and 3 under mpirun (2, 3 and 4 ranks; 3 pads the buckets) against plain data parallelism on
// the same global batches: the same losses, gradient norms and weights (within 1e-5) with gradient accumulation
// and clipping, stage 3 around block recompute too, and stage 2 in bf16 (its 16-bit LM head reduced by wte's
// gradient hook; per-rank bytes: test_zero_memory.cpp);
// the optimizer state gathered whole for a checkpoint equal to data parallelism's, and sharded back from it; a
// checkpoint written from a ZeRO run resumes in one process, and one written by one process resumes under ZeRO,
// continuing as data parallelism does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>

#include "ch07_memory/recompute.h"
#include "ch07_memory/zero/parameter_gather.h"
#include "ch07_memory/zero/zero_step.h"
#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/memory_steps.h"
#include "common/core/parallel.h"
#include "common/dist/data_parallel_step.h"
#include "tests/ch07_memory/step_fixture.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::ch07 {
namespace {

using testing::small_step_config;
using testing::step_test_adamw;
using testing::step_test_batch;
using testing::step_test_config;

constexpr int64_t kRows = 2, kSeq = 16;  // per rank and micro-batch
constexpr int kSteps = 3;
constexpr double kLr = 3e-3;
// Small buckets, so that the model (about 56k parameters) has many and the one being filled is small beside the
// shards.
constexpr int64_t kBucketBytes = 4 << 10;

struct RankRun {
  std::unique_ptr<GPT2> model;
  std::unique_ptr<AdamW> optimizer;
  std::unique_ptr<TrainStep> step;
  std::vector<TrainStepResult> results;
};

// A model and optimizer on this rank; `zero_stage` 0 is plain (bucketed) data parallelism. `load`, when given,
// sets the weights and optimizer state before the step is made (stage 3 shards the weights it finds).
RankRun make_run(comm::Communicator& group, int zero_stage, int64_t accum_steps, double grad_clip,
                 const std::function<void(RankRun&)>& load = {}, RecomputePolicy recompute = RecomputePolicy::None,
                 bool prefetch = false) {
  RankRun run;
  ModelOptions options;
  apply_recompute(options, recompute);
  run.model = std::make_unique<GPT2>(small_step_config(), Device::cpu(), options);
  run.model->init_weights(11);
  const TrainStepConfig config = step_test_config(accum_steps, grad_clip);
  if (zero_stage == 0) {
    run.optimizer = std::make_unique<AdamW>(run.model->parameters(), step_test_adamw());
    if (load) load(run);
    run.step = std::make_unique<dist::DataParallelStep>(group, dist::DpStage::Bucketed, kBucketBytes, *run.model,
                                                        *run.optimizer, config);
  } else {
    const ZeroShards shards =
        zero_shards(zero_stage, run.model->parameters(), group.size(), group.rank(), kBucketBytes);
    run.optimizer = std::make_unique<AdamW>(run.model->parameters(), step_test_adamw(), shards.owned());
    if (load) load(run);
    run.step = make_zero_step(zero_stage, group, shards, dist::DpStage::Bucketed, *run.model, *run.optimizer, config,
                              prefetch);
  }
  return run;
}

// The run's whole flat parameter buffer (gathered from the shards under stage 3: collective), a copy.
Tensor whole_parameters(RankRun& run) {
  Tensor out;
  with_whole_model(*run.step, [&] { out = run.model->parameters().params().clone(); });
  return out;
}

// Steps [first, last) of the run on this rank's share of each global batch; `alone` reads the whole global
// batch (one process).
void train_steps(RankRun& run, const comm::Communicator& group, int first, int last, bool alone = false) {
  const int64_t global_rows = kRows * group.size(), first_row = alone ? 0 : kRows * group.rank();
  const int64_t rows = alone ? global_rows : kRows;
  for (int s = first; s < last; ++s) {
    int micro = 0;
    run.results.push_back(
        run.step->run([&] { return step_test_batch(s, micro++, global_rows, first_row, rows, kSeq); }, kLr));
  }
}

// How many elements of a and b differ by more than `limit`.
int64_t count_differing(const Tensor& a, const Tensor& b, double limit) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  int64_t n = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) n += std::fabs(double(x[i]) - double(y[i])) > limit;
  return n;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  EXPECT_EQ(x.size(), y.size());
  double d = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) d = std::max(d, std::fabs(double(x[i]) - double(y[i])));
  return d;
}

struct ZeroCase {
  int stage;
  int64_t accum_steps;
  double grad_clip;
  RecomputePolicy recompute = RecomputePolicy::None;
  bool prefetch = false;
  DType matmul = DType::F32;  // bf16: 16-bit products, and the model's own LM head (not stage 2's chunked one)
};

class ZeroTest : public ::testing::TestWithParam<ZeroCase> {};

TEST_P(ZeroTest, TrainsAsDataParallelism) {
  const ZeroCase c = GetParam();
  set_num_threads(1);  // the ranks share the machine's cores
  const std::unique_ptr<comm::Communicator> group = testing::fresh_communicator();
  RankRun dp = make_run(*group, 0, c.accum_steps, c.grad_clip);
  RankRun zero = make_run(*group, c.stage, c.accum_steps, c.grad_clip, {}, c.recompute, c.prefetch);
  for (RankRun* run : {&dp, &zero}) run->model->set_matmul_dtype(c.matmul);  // after the step, as the trainer
  train_steps(dp, *group, 0, kSteps);
  train_steps(zero, *group, 0, kSteps);
  // Under bf16 a last-bit difference in an fp32 weight can flip the rounding of its 16-bit copy, which Adam's
  // normalised update turns into a step of a fraction of lr: the steps after the first within looser bounds. And
  // where a gradient element is near 0, a rounding-level difference can change its sign, which Adam's first
  // steps (updates of about lr whatever the gradient's size) turn into up to 2 lr a step: a few such elements
  // may differ by more (at np 3 on an AVX-512 CPU, whose sums round differently, one of 55488 parameters by
  // 0.42 lr), none by more than 2 lr a step.
  // Not bitwise even in fp32: stages 2 and 3 reduce wte's two contributions apart, (h0 + h1) + (l0 + l1), where data
  // parallelism reduces each rank's sum, (h0 + l0) + (h1 + l1) (ch07 README: keeping that order would need wte's
  // gradient whole, which these stages exist to avoid).
  const bool bf16 = c.matmul == DType::BF16;
  const double tolerance = bf16 ? 1e-3 : 1e-5;
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(zero.results[s].loss, dp.results[s].loss, tolerance) << "step " << s;
    EXPECT_NEAR(zero.results[s].grad_norm, dp.results[s].grad_norm, tolerance * dp.results[s].grad_norm)
        << "step " << s;
  }
  const Tensor zero_params = whole_parameters(zero), dp_params = dp.model->parameters().params();
  if (bf16) {
    EXPECT_LE(count_differing(zero_params, dp_params, 0.2 * kLr), zero_params.numel() / 1000);
    EXPECT_LT(max_abs_difference(zero_params, dp_params), 2 * kLr * kSteps);
  } else {
    EXPECT_LT(max_abs_difference(zero_params, dp_params), 1e-5);
  }
  // The steps must have trained: the loss moved.
  EXPECT_NE(dp.results.front().loss, dp.results.back().loss);

  // A checkpoint's moments: gathered whole they are data parallelism's; sharded back they are this rank's.
  const std::unique_ptr<AdamW> whole = gather_whole_optimizer(*group, *zero.optimizer, zero.model->parameters());
  EXPECT_EQ(whole->steps_taken(), kSteps);
  EXPECT_LT(max_abs_difference(whole->m(), dp.optimizer->m()), bf16 ? 1e-4 : 1e-6);
  EXPECT_LT(max_abs_difference(whole->v(), dp.optimizer->v()), bf16 ? 1e-6 : 1e-8);
  AdamW resumed(zero.model->parameters(), step_test_adamw(), zero.optimizer->owned());
  load_optimizer_shard(*whole, resumed);
  EXPECT_EQ(resumed.steps_taken(), kSteps);
  EXPECT_EQ(max_abs_difference(resumed.m(), zero.optimizer->m()), 0.0);
  EXPECT_EQ(max_abs_difference(resumed.v(), zero.optimizer->v()), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroTest,
                         ::testing::Values(ZeroCase{1, 1, 0.0}, ZeroCase{1, 2, 0.5}, ZeroCase{2, 1, 0.0},
                                           ZeroCase{2, 2, 0.5}, ZeroCase{3, 1, 0.0}, ZeroCase{3, 2, 0.5},
                                           ZeroCase{3, 2, 0.5, RecomputePolicy::Block},
                                           ZeroCase{3, 2, 0.5, RecomputePolicy::SelectiveLayerNorm},
                                           ZeroCase{3, 2, 0.5, RecomputePolicy::None, true},
                                           ZeroCase{3, 1, 0.0, RecomputePolicy::Block, true},
                                           ZeroCase{2, 2, 0.5, RecomputePolicy::None, false, DType::BF16}),
                         [](const auto& info) {
                           return cat(
                               "stage", info.param.stage, "_accum", info.param.accum_steps,
                               info.param.grad_clip > 0 ? "_clipped" : "",
                               info.param.recompute == RecomputePolicy::Block ? "_block_recompute" : "",
                               info.param.recompute == RecomputePolicy::SelectiveLayerNorm ? "_ln_recompute" : "",
                               info.param.prefetch ? "_prefetch" : "", info.param.matmul == DType::BF16 ? "_bf16" : "");
                         });

// One process's run on the whole global batch (every rank runs its own copy), with a plain step and AdamW.
RankRun make_single_process_run() {
  RankRun run;
  run.model = std::make_unique<GPT2>(small_step_config(), Device::cpu());
  run.model->init_weights(11);
  run.optimizer = std::make_unique<AdamW>(run.model->parameters(), step_test_adamw());
  run.step = std::make_unique<TrainStep>(*run.model, *run.optimizer, step_test_config(1, 0.5));
  return run;
}

// A fresh directory for a checkpoint, made by rank 0 and seen by every rank.
std::string checkpoint_path(comm::Communicator& group, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(LAB_BINARY_DIR) / "test_scratch" / cat("zero_checkpoint_np", group.size(), "_", name);
  if (group.rank() == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir.parent_path());
  }
  group.barrier();
  return dir.string();
}

TrainState state_at(int step) {
  TrainState s;
  s.step = step;
  s.config = small_step_config();
  return s;
}

TEST(ZeroCheckpoint, SavedUnderZeroResumesInOneProcessAndTheReverse) {
  set_num_threads(1);
  const std::unique_ptr<comm::Communicator> group = testing::fresh_communicator();
  RankRun dp = make_run(*group, 0, 1, 0.5);
  train_steps(dp, *group, 0, 4);
  for (int stage = 1; stage <= 3; ++stage) {
    // ZeRO trains 2 steps and saves the whole state (rank 0 writes); one process resumes for steps 3 and 4.
    const std::string saved_by_zero = checkpoint_path(*group, cat("stage", stage, "_to_one"));
    RankRun zero = make_run(*group, stage, 1, 0.5);
    train_steps(zero, *group, 0, 2);
    const std::unique_ptr<AdamW> whole = gather_whole_optimizer(*group, *zero.optimizer, zero.model->parameters());
    with_whole_model(*zero.step, [&] {
      if (group->rank() == 0) save_checkpoint(saved_by_zero, *zero.model, *whole, state_at(2));
    });
    group->barrier();
    RankRun one = make_single_process_run();
    load_checkpoint(saved_by_zero, *one.model, *one.optimizer);
    train_steps(one, *group, 2, 4, true);
    for (int s = 0; s < 2; ++s)
      EXPECT_NEAR(one.results[s].loss, dp.results[2 + s].loss, 1e-5) << "stage " << stage << " -> one process";

    // The reverse: one process trains 2 steps and saves; ZeRO loads the whole state, keeps its shard, goes on.
    const std::string saved_alone = checkpoint_path(*group, cat("one_to_stage", stage));
    RankRun alone = make_single_process_run();
    train_steps(alone, *group, 0, 2, true);
    if (group->rank() == 0) save_checkpoint(saved_alone, *alone.model, *alone.optimizer, state_at(2));
    group->barrier();
    RankRun resumed = make_run(*group, stage, 1, 0.5, [&](RankRun& run) {
      AdamW loaded(run.model->parameters(), step_test_adamw());
      load_checkpoint(saved_alone, *run.model, loaded);
      load_optimizer_shard(loaded, *run.optimizer);
    });
    train_steps(resumed, *group, 2, 4);
    for (int s = 0; s < 2; ++s)
      EXPECT_NEAR(resumed.results[s].loss, dp.results[2 + s].loss, 1e-5) << "one process -> stage " << stage;
    // The first two steps ran in one process on the whole batch, in another order of additions than data
    // parallelism's: Adam's normalised update of a near-zero gradient turns that into steps of a fraction of lr.
    EXPECT_LT(max_abs_difference(whole_parameters(resumed), dp.model->parameters().params()), 0.05 * kLr);
  }
}

TEST(ZeroStep, RefusesAStageItDoesNotHave) {
  set_num_threads(1);  // the ranks share the machine's cores
  const std::unique_ptr<comm::Communicator> group = testing::fresh_communicator();
  GPT2 model(small_step_config(), Device::cpu());
  const ZeroShards shards(model.parameters(), group->size(), group->rank(), kBucketBytes);
  AdamW sharded(model.parameters(), step_test_adamw(), shards.owned()), whole(model.parameters(), step_test_adamw());
  try {
    make_zero_step(4, *group, shards, dist::DpStage::Bucketed, model, sharded, step_test_config(1, 0.0));
    ADD_FAILURE() << "stage 4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--zero 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_zero_step(3, *group, shards, dist::DpStage::Bucketed, model, sharded, step_test_config(1, 0.0)),
               Error)
      << "stage 3 with buckets of bytes instead of whole blocks";
  EXPECT_THROW(
      make_zero_step(2, *group, shards, dist::DpStage::Bucketed, model, sharded, step_test_config(1, 0.0), true), Error)
      << "prefetch below stage 3";
  EXPECT_THROW(make_zero_step(1, *group, shards, dist::DpStage::Bucketed, model, whole, step_test_config(1, 0.0)),
               Error)
      << "an optimizer that is not sharded";
}

}  // namespace
}  // namespace lab::ch07
