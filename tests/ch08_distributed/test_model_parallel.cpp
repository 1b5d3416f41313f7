// Tensor and pipeline parallelism under mpirun (2 and 4 ranks), against the single-process run on the same
// global batches: 5 steps of AdamW with clipping and 4 micro-batches accumulated per step, the losses and
// gradient norms within 1e-5 relative and every rank's final weights within the fp32 tolerance of its slice
// of the single-process weights. Layouts: tp 2, pp 2 (GPipe and 1F1B) on 2 ranks; tp 2 x pp 2, dp 2 x tp 2,
// dp 2 x pp 2, tp 4 and pp 4 on 4 ranks (a layout that does not fit the job is skipped). The vocabulary (300,
// padded to 384) is padded to 512 under tp, so tp 4's last slice is all padding. Also: 1F1B's live
// micro-batches within P - stage while GPipe holds all M, the measured bubble, whole tensors gathered from
// the shards, and a weights file loaded into every shard. And fp16 with loss scaling from a scale that overflows
// (dp 1 layouts): the same steps skipped and the same scales as the single process, the losses within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "ch08_distributed/pp/pipeline_step.h"
#include "ch08_distributed/tp/tensor_parallel.h"
#include "ch08_distributed/tp/whole_tensors.h"
#include "common/core/step_profile.h"
#include "common/nn/gpt2_weights.h"
#include "common/train/loss_scaler.h"
#include "tests/ch08_distributed/layout_runs.h"
#include "tests/common/comm/mpi_test.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using ch08::PpSchedule;
using testing::LayoutCase;

// How far the final weights may be from the single-process run's: 5% of one step's largest AdamW update (the
// learning rate). AdamW divides each gradient by its own running scale, so an element whose gradient is
// rounding noise moves by up to lr per step whatever the noise's size, and different summation orders give
// different noise: the key bias's gradient, zero in exact arithmetic (softmax ignores a shift shared by every
// key), moves by up to 1e-6 in 5 steps here, and a few weights with near-zero gradients by up to 1.1e-5
// (measured on an AMD EPYC: OpenBLAS picks its kernels by CPU, and each sums in its own order). A wrong
// slice or a gradient counted twice moves weights by about lr per step, 100 times this.
constexpr double kWeightTolerance = 5e-2 * testing::kLearningRate;

// Two layouts per job size and dimension mix, each a test of its own.
std::vector<LayoutCase> layouts() {
  return {{{1, 2, 1}},
          {{1, 1, 2}, PpSchedule::GPipe},
          {{1, 1, 2}, PpSchedule::OneFOneB},
          {{1, 2, 2}},
          {{2, 2, 1}},
          {{2, 1, 2}, PpSchedule::OneFOneB},
          {{1, 4, 1}},
          {{1, 1, 4}, PpSchedule::GPipe}};
}

using ModelParallelLayouts = testing::LayoutTest<LayoutCase>;

TEST_P(ModelParallelLayouts, MatchTheSingleProcessRun) {
  const GPT2Config config = testing::layout_test_config();
  const testing::RunSettings run;
  const LayoutCase& c = GetParam();
  const testing::RunResult reference = testing::run_single_process(config, run, c.layout.dp);
  const testing::LayoutRun r = testing::run_layout(*world_, c, config, run);
  const testing::RunResult& got = r.result;

  for (int s = 0; s < run.steps; ++s) {
    EXPECT_NEAR(got.losses[s], reference.losses[s], 1e-5 * reference.losses[s]) << "step " << s;
    EXPECT_NEAR(got.grad_norms[s], reference.grad_norms[s], 1e-5 * reference.grad_norms[s]) << "step " << s;
  }
  EXPECT_GT(reference.grad_norms[0], testing::kGradClip) << "clipping should take part";
  double worst = 0;
  for (const auto& [name, weights] : got.weights) {
    const Tensor expected = testing::slice_for(*r.model, name, reference.weights.at(name));
    const double error = test::max_abs_error(weights.to_floats(), expected.to_floats());
    EXPECT_LT(error, kWeightTolerance) << name;
    worst = std::max(worst, error);
  }
  if (world_->rank() == 0)
    std::printf("%s: loss %.6f -> %.6f (one process %.6f -> %.6f), worst weight error %.2e\n", c.name().c_str(),
                got.losses.front(), got.losses.back(), reference.losses.front(), reference.losses.back(), worst);
}

// fp16 with dynamic loss scaling: the scale lives on each rank's device, the last pipeline stage's classifier (or
// every tensor-parallel rank's slice of it) reads it there, and every rank gets the same all-reduced norm, so every
// rank skips the same overflowing steps as the single process and moves its scale the same way. 2^24 overflows
// fp16 at first; the scale then halves until it fits and grows after every 2 clean steps.
TEST_P(ModelParallelLayouts, MatchTheSingleProcessRunInFp16WithLossScaling) {
  const GPT2Config config = testing::layout_test_config();
  testing::RunSettings run;
  run.steps = 8;
  run.fp16 = LossScalerConfig{16777216.0, 2.0, 0.5, 2};
  const LayoutCase& c = GetParam();
  // A data-parallel rank's loss is the mean over its own rows: its gradients before the average are dp times the
  // single process's and overflow fp16 at a scale dp times smaller, so its skips are not the single process's.
  if (c.layout.dp > 1) GTEST_SKIP() << "dp " << c.layout.dp << ": the overflows differ from the single process's";
  const testing::RunResult reference = testing::run_single_process(config, run, c.layout.dp);
  const testing::LayoutRun r = testing::run_layout(*world_, c, config, run);
  const testing::RunResult& got = r.result;
  EXPECT_EQ(got.skipped, reference.skipped);
  EXPECT_EQ(got.loss_scales, reference.loss_scales);
  const auto skips = std::count(reference.skipped.begin(), reference.skipped.end(), true);
  EXPECT_GE(skips, 1) << "no step overflowed: the test does not exercise the skip";
  EXPECT_LT(skips, run.steps) << "every step overflowed: the test does not exercise the update";
  for (int s = 0; s < run.steps; ++s) {
    EXPECT_NEAR(got.losses[s], reference.losses[s], 1e-4 * reference.losses[s]) << "step " << s;
    if (!reference.skipped[s]) {
      EXPECT_NEAR(got.grad_norms[s], reference.grad_norms[s], 1e-3 * reference.grad_norms[s]) << "step " << s;
    }
  }
  // fp16 rounds each matmul operand to 11 bits, and the layouts add partial products in another order, so a rounding
  // can fall the other way; AdamW's normalised step turns a gradient element near zero whose sign then differs into
  // a weight that differs by up to 2 lr a step. So the weights are held to the mean of their differences (a missed
  // or an extra update moves every weight by about lr), and to being finite (a NaN update applied).
  double total_error = 0, worst = 0;
  int64_t count = 0;
  for (const auto& [name, weights] : got.weights) {
    const std::vector<float> w = weights.to_floats();
    const std::vector<float> e = testing::slice_for(*r.model, name, reference.weights.at(name)).to_floats();
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_TRUE(std::isfinite(w[i])) << name << "[" << i << "]";
      total_error += std::fabs(static_cast<double>(w[i]) - e[i]);
      worst = std::max(worst, std::fabs(static_cast<double>(w[i]) - e[i]));
    }
    count += static_cast<int64_t>(w.size());
  }
  const double mean_error = total_error / static_cast<double>(count);
  EXPECT_LT(mean_error, kWeightTolerance);
  if (world_->rank() == 0)
    std::printf("%s fp16: %lld of %d steps skipped, scale %.0f -> %.0f, weight error mean %.2e, worst %.2e\n",
                c.name().c_str(), static_cast<long long>(skips), run.steps, reference.loss_scales.front(),
                reference.loss_scales.back(), mean_error, worst);
}

// The whole tensors gathered on rank 0 from every rank's shard are the single-process run's.
TEST_P(ModelParallelLayouts, GatherTheWholeTensorsOnRankZero) {
  const GPT2Config config = testing::layout_test_config();
  testing::RunSettings run;
  run.steps = 2;
  const LayoutCase& c = GetParam();
  const testing::RunResult reference = testing::run_single_process(config, run, c.layout.dp);
  const testing::LayoutRun r = testing::run_layout(*world_, c, config, run);
  const std::vector<NamedTensor> whole =
      ch08::tp::gather_whole_tensors(*r.model, r.model->parameters().params(), *r.context);
  if (world_->rank() != 0) {
    EXPECT_TRUE(whole.empty());
    return;
  }
  EXPECT_EQ(whole.size(), reference.weights.size());
  for (const NamedTensor& t : whole) {
    Tensor expected = reference.weights.at(t.name);
    Tensor actual = t.tensor;
    if (t.name == "wte.weight") {  // the layout's padded rows are zero
      const std::vector<float> padding = actual.slice_rows(expected.dim(0), actual.dim(0)).to_floats();
      EXPECT_TRUE(std::all_of(padding.begin(), padding.end(), [](float v) { return v == 0.0f; }));
      actual = actual.slice_rows(0, expected.dim(0));
    }
    EXPECT_EQ(actual.shape(), expected.shape()) << t.name;
    EXPECT_LT(test::max_abs_error(actual.to_floats(), expected.to_floats()), kWeightTolerance) << t.name;
  }
}

// A weights file of the whole model loads into every shard as its slice of each tensor.
TEST_P(ModelParallelLayouts, LoadTheirSliceOfAWeightsFile) {
  const GPT2Config config = testing::layout_test_config();
  GPT2 whole(config, Device::cpu());
  whole.init_weights(99);
  const std::string path = cat(::testing::TempDir(), "model_parallel_", GetParam().name(), ".safetensors");
  if (world_->rank() == 0) save_gpt2_weights(whole, path);
  world_->barrier();
  const comm::ParallelContext context(*world_, GetParam().layout);
  const std::unique_ptr<GPT2> model = ch08::tp::model_for_rank(context, config, Device::cpu());
  load_gpt2_weights(*model, path);
  for (const ParamInfo& p : model->parameters().infos())
    EXPECT_EQ(model->parameters().value(p.name).to_floats(),
              testing::slice_for(*model, p.name, whole.parameters().value(p.name)).to_floats())
        << p.name;
  world_->barrier();
  if (world_->rank() == 0) std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ModelParallelLayouts, ::testing::ValuesIn(layouts()),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) { return info.param.name(); });

// A pipeline over every rank of the world with 2 P micro-batches: 1F1B holds at most P - stage micro-batches
// on each stage, GPipe all of them; the bubble is measured and printed next to the theory.
TEST(Pipeline, OneFOneBBoundsTheLiveMicroBatches) {
  const std::unique_ptr<comm::Communicator> world = testing::fresh_communicator();
  const int P = world->size();
  testing::RunSettings run;
  run.steps = 2;
  run.micro_batches = 2 * P;
  for (PpSchedule schedule : {PpSchedule::GPipe, PpSchedule::OneFOneB}) {
    const testing::LayoutRun r = testing::run_layout(*world, {{1, 1, P}, schedule}, testing::layout_test_config(), run);
    const auto& step = dynamic_cast<const ch08::pp::PipelineStep&>(*r.step);
    const ch08::pp::PipelineStepStats& stats = step.last_stats();
    const int stage = r.context->coords().pp;
    EXPECT_EQ(stats.peak_live, schedule == PpSchedule::GPipe ? run.micro_batches : P - stage)
        << ch08::pp_schedule_name(schedule) << ", stage " << stage;
    EXPECT_DOUBLE_EQ(stats.ideal_bubble, (P - 1.0) / (run.micro_batches + P - 1.0));
    EXPECT_GE(stats.bubble, 0.0);
    EXPECT_LT(stats.bubble, 1.0);
    EXPECT_GT(stats.busy_seconds, 0.0);  // read from the stage's marks at the report
    EXPECT_LE(stats.busy_seconds, stats.span_seconds);
    if (world->rank() == 0)
      std::printf("%s, %d stages, %lld micro-batches: bubble %.3f measured, %.3f in theory\n",
                  ch08::pp_schedule_name(schedule), P, static_cast<long long>(run.micro_batches), stats.bubble,
                  stats.ideal_bubble);
  }
}

// The pipeline's step reads no loss back while it is enqueued: the last stage adds each micro-batch's mean loss into
// the step's device sum (accumulate_sum, never the host's sum), and an all-reduce on the device gives every stage the
// loss that report() reads.
TEST(Pipeline, EnqueueReadsNoLossBack) {
  const std::unique_ptr<comm::Communicator> world = testing::fresh_communicator();
  const int P = world->size();
  testing::RunSettings run;
  run.steps = 1;
  const testing::LayoutRun r =
      testing::run_layout(*world, {{1, 1, P}, PpSchedule::OneFOneB}, testing::layout_test_config(), run);
  const bool last = r.context->is_last_stage();
  const MicroBatch batch{Tensor::from_ints(std::vector<int32_t>(run.batch * run.seq, 7), {run.batch, run.seq}),
                         Tensor::from_ints(std::vector<int32_t>(run.batch * run.seq, 11), {run.batch, run.seq})};
  StepProfile profile;
  r.step->enqueue([&] { return batch; }, testing::kLearningRate);
  profile.close();
  const TrainStepResult result = r.step->report();
  int64_t host_sums = 0, device_sums = 0;
  for (const ProfileRow& row : profile.rows(ProfileKind::Op)) {
    if (row.name == "sum") host_sums += row.calls;
    if (row.name == "accumulate_sum") device_sums += row.calls;
  }
  EXPECT_EQ(host_sums, 0) << "a loss was summed on the host in enqueue()";
  EXPECT_EQ(device_sums, last ? run.micro_batches : 0);
  // Every stage reports the last stage's loss: a fresh model's, about log(vocabulary).
  const float loss = static_cast<float>(result.loss);
  const Tensor extremes = Tensor::from_floats(std::vector<float>{loss, -loss}, {2});  // the highest, -the lowest
  world->all_reduce(extremes, comm::ReduceOp::Max);
  EXPECT_EQ(extremes.to_floats()[0], -extremes.to_floats()[1]);
  EXPECT_GT(result.loss, 1.0);
}

}  // namespace
}  // namespace lab
