// The trainer on CUDA follows the trainer on the CPU: the same tiny model, data and flags, a few steps each,
// compared step by step (training loss, gradient norm, learning rate) and at the end (validation loss, every
// weight). Strict fp32 on both sides; skipped when no GPU is visible (the emulation build runs it). With
// --cuda-graphs the trainer on CUDA follows itself without graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ch10_gpt2/trainer.h"
#include "common/io/shards.h"
#include "common/nn/gpt2.h"
#include "common/nn/parameters.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

// A learnable stream: a repeating pattern of 97 distinct token ids.
void write_pattern_shard(const std::string& path, int64_t n, int offset) {
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(((i + offset) % 97) * 311 % 50257);
  write_shard(path, tokens);
}

std::vector<Json> read_log(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

constexpr int64_t kSeed = 1337;

// || (actual - start) - (expected - start) || / || expected - start ||: how far an update is from the reference's.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  double most = 0;
  for (size_t i = 0; i < x.size(); ++i) most = std::max(most, std::fabs(static_cast<double>(x[i]) - y[i]));
  return most;
}

double update_error(const Tensor& actual, const Tensor& expected, const Tensor& start) {
  const std::vector<float> a = actual.to_floats(), e = expected.to_floats(), s = start.to_floats();
  double diff = 0, size = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    diff += std::pow(static_cast<double>(a[i]) - e[i], 2);
    size += std::pow(static_cast<double>(e[i]) - s[i], 2);
  }
  return std::sqrt(diff / size);
}

struct TrainingRun {
  TrainSummary summary;
  std::vector<Json> steps;                                   // the log's per-step records, in order
  std::vector<std::pair<std::string, Tensor>> final_params;  // name -> value at the end, on the CPU
};

// fp16 runs start from a loss scale of 2^20, which overflows this model's backward at first, and grow it after every
// 2 clean steps: skips, backoff and growth all happen in 4 steps.
// `rungs` sets the model's rungs on top (kernels, attention, recompute, activations).
TrainingRun train_on(const std::string& device, const std::string& dir, bool cuda_graphs = false,
                     const std::string& dtype = "fp32", const std::function<void(TrainOptions&)>& rungs = {}) {
  TrainOptions o;
  o.data_train = dir + "/train_000000.bin";
  o.data_val = dir + "/val_000000.bin";
  o.model = "tiny";
  o.device = device;
  o.dtype = dtype;
  o.loss_scale = 1048576.0;
  o.loss_scale_interval = 2;
  o.batch = 2;
  o.seq = 32;
  o.steps = 4;
  o.lr = 1e-2;
  o.warmup_steps = 1;
  o.eval_every = 0;
  o.val_batches = 2;
  o.sample_tokens = 0;
  o.seed = kSeed;
  o.cuda_graphs = cuda_graphs;
  if (rungs) rungs(o);
  o.log_json = dir + "/" + device + "_" + dtype + (cuda_graphs ? "_graphs" : "") + ".jsonl";
  Trainer trainer(o);
  TrainingRun run;
  run.summary = trainer.run();
  for (Json& record : read_log(o.log_json))
    if (record.contains("loss") && !record.contains("val_loss")) run.steps.push_back(std::move(record));
  const ParameterStore& params = trainer.model().parameters();
  for (const ParamInfo& info : params.infos())
    run.final_params.emplace_back(info.name, params.value(info.name).to(Device::cpu()));
  return run;
}

TEST(TrainerOnCuda, FollowsTheCpuOverAFewSteps) {
  LAB_REQUIRE_GPU();
  const std::string dir = testing::scratch_directory();
  write_pattern_shard(dir + "/train_000000.bin", 4000, 0);
  write_pattern_shard(dir + "/val_000000.bin", 1000, 11);
  const TrainingRun cpu = train_on("cpu", dir);
  const TrainingRun gpu = train_on("cuda", dir);

  ASSERT_EQ(cpu.steps.size(), 4u);
  ASSERT_EQ(gpu.steps.size(), cpu.steps.size());
  // fp32 on both devices, summed in different orders: the losses agree to a few parts in 1e5 and drift
  // apart slowly through the optimizer (the same bounds as tests/common/cuda/test_gpt2_cuda.cpp).
  for (size_t i = 0; i < cpu.steps.size(); ++i) {
    const double loss = cpu.steps[i].at("loss").as_number();
    const double norm = cpu.steps[i].at("grad_norm").as_number();
    EXPECT_EQ(gpu.steps[i].at("step").as_int(), cpu.steps[i].at("step").as_int());
    EXPECT_DOUBLE_EQ(gpu.steps[i].at("lr").as_number(), cpu.steps[i].at("lr").as_number());
    EXPECT_NEAR(gpu.steps[i].at("loss").as_number(), loss, 2e-5 * loss) << "step " << i + 1;
    EXPECT_NEAR(gpu.steps[i].at("grad_norm").as_number(), norm, 1e-4 * norm) << "step " << i + 1;
  }
  EXPECT_LT(cpu.steps.back().at("loss").as_number(), cpu.steps.front().at("loss").as_number()) << "it learns";
  EXPECT_NEAR(gpu.summary.last_val_loss, cpu.summary.last_val_loss, 2e-5 * cpu.summary.last_val_loss);
  // Every weight, judged by its update: the final weights minus the initial ones, which both runs draw from
  // the same seed. AdamW normalises each element's step, so an element whose gradient is within rounding of
  // zero moves by up to the learning rate in either direction, and the weights compared element by element
  // part by that much; the update as a whole agrees far better (at most 8e-5 per tensor in the emulation build,
  // against a bound of 1e-3). The key
  // part of c_attn's bias is left out: its exact gradient is zero (softmax ignores a shift of a whole row of
  // scores), so AdamW moves it by rounding noise alone, differently on each device.
  GPT2 initial(GPT2Config::from_name("tiny"), Device::cpu());
  initial.init_weights(kSeed);
  ASSERT_EQ(gpu.final_params.size(), cpu.final_params.size());
  for (size_t i = 0; i < cpu.final_params.size(); ++i) {
    const auto& [name, expected] = cpu.final_params[i];
    const Tensor& actual = gpu.final_params[i].second;
    const Tensor start = initial.parameters().value(name);
    std::vector<std::pair<int64_t, int64_t>> ranges = {{0, expected.numel()}};
    if (name.ends_with("attn.c_attn.bias")) {
      const int64_t C = expected.numel() / 3;
      ranges = {{0, C}, {2 * C, 3 * C}};
    }
    for (const auto& [begin, end] : ranges) {
      const Shape shape = {end - begin};
      EXPECT_LT(update_error(actual.view(begin, shape), expected.view(begin, shape), start.view(begin, shape)), 1e-3)
          << name << " [" << begin << ", " << end << ")";
    }
  }
}

// --cuda-graphs: the first step eager, the second captured, the others replayed, each with its own learning rate
// (warm-up, then decay) and batch. The embedding's backward adds repeated tokens' rows with atomics, in an order
// that changes between runs, so the runs agree to rounding, not bit for bit (ch09's GraphedStep test compares bits).
TEST(TrainerOnCuda, CudaGraphsTrainAsTheEagerStep) {
  LAB_REQUIRE_GPU();
  const std::string dir = testing::scratch_directory();
  write_pattern_shard(dir + "/train_000000.bin", 4000, 0);
  write_pattern_shard(dir + "/val_000000.bin", 1000, 11);
  const TrainingRun eager = train_on("cuda", dir);
  const TrainingRun graphed = train_on("cuda", dir, true);
  ASSERT_EQ(graphed.steps.size(), eager.steps.size());
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const double loss = eager.steps[i].at("loss").as_number();
    EXPECT_EQ(graphed.steps[i].at("lr").as_number(), eager.steps[i].at("lr").as_number()) << "step " << i + 1;
    EXPECT_NEAR(graphed.steps[i].at("loss").as_number(), loss, 1e-6 * loss) << "step " << i + 1;
  }
  EXPECT_NE(eager.steps[1].at("lr").as_number(), eager.steps[3].at("lr").as_number());
  EXPECT_NEAR(graphed.summary.last_val_loss, eager.summary.last_val_loss, 1e-6 * eager.summary.last_val_loss);
  for (size_t i = 0; i < eager.final_params.size(); ++i)
    EXPECT_LT(max_abs_diff(graphed.final_params[i].second, eager.final_params[i].second), 1e-5)
        << eager.final_params[i].first;
}

// --cuda-graphs with every speed rung and LayerNorm recompute in bf16: the recomputed LayerNorm outputs are released
// and allocated again inside the captured step (from the graph's private pool), and the replays train as the eager
// step does.
TEST(TrainerOnCuda, CudaGraphsCaptureTheLayerNormRecompute) {
  LAB_REQUIRE_GPU();
  const std::string dir = testing::scratch_directory();
  write_pattern_shard(dir + "/train_000000.bin", 4000, 0);
  write_pattern_shard(dir + "/val_000000.bin", 1000, 11);
  const auto rungs = [](TrainOptions& o) {
    o.kernels = "fused";
    o.attention = "flash";
    o.recompute = "selective-ln";
    o.activations = "16bit";
  };
  const TrainingRun eager = train_on("cuda", dir, false, "bf16", rungs);
  const TrainingRun graphed = train_on("cuda", dir, true, "bf16", rungs);
  ASSERT_EQ(graphed.steps.size(), eager.steps.size());
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const double loss = eager.steps[i].at("loss").as_number();
    EXPECT_NEAR(graphed.steps[i].at("loss").as_number(), loss, 1e-5 * loss) << "step " << i + 1;
  }
  for (size_t i = 0; i < eager.final_params.size(); ++i)
    EXPECT_LT(max_abs_diff(graphed.final_params[i].second, eager.final_params[i].second), 1e-4)
        << eager.final_params[i].first;
}

// --cuda-graphs with fp16: the loss scale, its counts and the skip decision live on the device, so the replays skip
// the steps the eager run skips and log the same scales.
TEST(TrainerOnCuda, CudaGraphsTrainAsTheEagerStepInFp16WithSkippedSteps) {
  LAB_REQUIRE_GPU();
  const std::string dir = testing::scratch_directory();
  write_pattern_shard(dir + "/train_000000.bin", 4000, 0);
  write_pattern_shard(dir + "/val_000000.bin", 1000, 11);
  const TrainingRun eager = train_on("cuda", dir, false, "fp16");
  const TrainingRun graphed = train_on("cuda", dir, true, "fp16");
  ASSERT_EQ(graphed.steps.size(), eager.steps.size());
  int skipped = 0;
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const Json& e = eager.steps[i];
    const Json& g = graphed.steps[i];
    EXPECT_EQ(g.at("loss_scale").as_number(), e.at("loss_scale").as_number()) << "step " << i + 1;
    EXPECT_EQ(g.at("skipped").as_bool(), e.at("skipped").as_bool()) << "step " << i + 1;
    EXPECT_EQ(g.at("skipped_steps").as_int(), e.at("skipped_steps").as_int()) << "step " << i + 1;
    EXPECT_NEAR(g.at("loss").as_number(), e.at("loss").as_number(), 1e-5 * e.at("loss").as_number()) << i + 1;
    skipped += e.at("skipped").as_bool() ? 1 : 0;
  }
  EXPECT_GE(skipped, 1) << "no step overflowed: the test does not exercise the skip";
  EXPECT_LT(skipped, static_cast<int>(eager.steps.size())) << "every step overflowed";
  for (size_t i = 0; i < eager.final_params.size(); ++i)
    EXPECT_LT(max_abs_diff(graphed.final_params[i].second, eager.final_params[i].second), 1e-4)
        << eager.final_params[i].first;
}

}  // namespace
}  // namespace lab
