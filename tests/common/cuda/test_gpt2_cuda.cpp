// GPT-2 as a whole on CUDA against the same model on the CPU: logits, loss, every parameter's gradient
// (padded vocabulary included), and 10 AdamW steps with clipping, in strict fp32 and in TF32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

GPT2Config small_config() {
  // A vocabulary of 1000 padded to 1024: the padded columns must stay out of the loss on both devices.
  return test::tiny_gpt2_config(/*vocab=*/1000, /*layers=*/2, /*heads=*/4, /*width=*/64, /*block=*/32);
}

struct Pair {
  GPT2 cpu, gpu;
  Tensor tokens_cpu, targets_cpu, tokens_gpu, targets_gpu;
  Pair(const GPT2Config& c, uint64_t seed) : cpu(c, Device::cpu()), gpu(c, test::kGpu) {
    cpu.init_weights(seed);
    gpu.init_weights(seed);
    Rng rng(seed + 1);
    tokens_cpu = test::random_ids({3, 29}, rng, c.vocab_size);  // T = 29: not a multiple of any block size
    targets_cpu = test::random_ids({3, 29}, rng, c.vocab_size);
    tokens_gpu = tokens_cpu.to(test::kGpu);
    targets_gpu = targets_cpu.to(test::kGpu);
  }
};

double mean(const Tensor& losses) {
  double s = 0;
  for (float l : losses.to_floats()) s += l;
  return s / static_cast<double>(losses.numel());
}

class GPT2OnCuda : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    set_tf32(test::kGpu, GetParam());
  }
  void TearDown() override {
    if (cuda_available()) set_tf32(test::kGpu, false);
  }
  // TF32 rounds GEMM inputs to 10 mantissa bits: compare at that precision.
  double scale() const { return GetParam() ? 300.0 : 1.0; }
};

TEST_P(GPT2OnCuda, InitialisationIsDeviceIndependent) {
  Pair p(small_config(), 11);
  EXPECT_EQ(p.gpu.parameters().params().to_floats(), p.cpu.parameters().params().to_floats());
}

TEST_P(GPT2OnCuda, LogitsLossAndEveryGradientMatchTheCpu) {
  Pair p(small_config(), 12);
  {
    Tape a(false), b(false);
    EXPECT_TRUE(test::all_close("logits", p.gpu.logits(a, p.tokens_gpu).value(), p.cpu.logits(b, p.tokens_cpu).value(),
                                {2e-5 * scale(), 2e-5 * scale()}));
  }
  Tape tg, tc;
  const double loss_gpu = mean(p.gpu.loss(tg, p.tokens_gpu, p.targets_gpu));
  const double loss_cpu = mean(p.cpu.loss(tc, p.tokens_cpu, p.targets_cpu));
  EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * scale() * loss_cpu);
  tg.backward();
  tc.backward();
  for (const ParamInfo& info : p.cpu.parameters().infos())
    EXPECT_TRUE(test::all_close(info.name.c_str(), p.gpu.parameters().grad(info.name),
                                p.cpu.parameters().grad(info.name), {1e-4 * scale(), 1e-4 * scale()}));
  std::printf("loss: cuda %.7f, cpu %.7f\n", loss_gpu, loss_cpu);
}

TEST_P(GPT2OnCuda, TenAdamWStepsMatchTheCpu) {
  Pair p(small_config(), 13);
  const std::vector<float> initial = p.cpu.parameters().params().to_floats();
  AdamW opt_gpu(p.gpu.parameters(), {}), opt_cpu(p.cpu.parameters(), {});
  for (int step = 0; step < 10; ++step) {
    double losses[2], norms[2];
    GPT2* models[2] = {&p.gpu, &p.cpu};
    AdamW* opts[2] = {&opt_gpu, &opt_cpu};
    const Tensor* tokens[2] = {&p.tokens_gpu, &p.tokens_cpu};
    const Tensor* targets[2] = {&p.targets_gpu, &p.targets_cpu};
    for (int d = 0; d < 2; ++d) {
      models[d]->parameters().zero_grad();
      Tape tape;
      losses[d] = mean(models[d]->loss(tape, *tokens[d], *targets[d]));
      tape.backward();
      norms[d] = global_grad_norm(models[d]->parameters());
      opts[d]->step(3e-3f, clip_coefficient(norms[d], 1.0));
    }
    EXPECT_NEAR(losses[0], losses[1], 2e-5 * scale() * losses[1]) << "step " << step;
    EXPECT_NEAR(norms[0], norms[1], 1e-4 * scale() * norms[1]) << "step " << step;
  }
  // Every weight, in [begin, end) ranges of the flat buffer. As in the PyTorch comparison, the key part of
  // c_attn's bias is left out: its exact gradient is zero (softmax ignores a shift of a whole row of scores), so
  // both devices follow rounding noise there.
  const int64_t C = small_config().n_embd;
  const std::vector<float> gpu = p.gpu.parameters().params().to_floats(), cpu = p.cpu.parameters().params().to_floats();
  for (const ParamInfo& info : p.cpu.parameters().infos()) {
    std::vector<std::pair<int64_t, int64_t>> ranges = {{info.offset, info.offset + info.numel()}};
    if (info.name.ends_with("attn.c_attn.bias"))
      ranges = {{info.offset, info.offset + C}, {info.offset + 2 * C, info.offset + 3 * C}};
    for (const auto& [begin, end] : ranges) {
      const std::vector<float> g(gpu.begin() + begin, gpu.begin() + end), c(cpu.begin() + begin, cpu.begin() + end);
      if (!GetParam()) {
        EXPECT_TRUE(test::all_close(info.name.c_str(), Tensor::from_floats(g, {end - begin}),
                                    Tensor::from_floats(c, {end - begin}), {1e-4, 1e-4}));
        continue;
      }
      // TF32 gradients carry relative errors near 1e-3, and AdamW normalises each element's step, so an element
      // whose gradient is within that error of zero may step either way: element by element the weights part
      // by up to a few learning rates. The update as a whole, weights minus their start, agrees to a few percent
      // (at most 6% per tensor in the emulation build).
      const std::vector<float> start(initial.begin() + begin, initial.begin() + end);
      double diff = 0, size = 0;
      for (size_t i = 0; i < c.size(); ++i) {
        diff += std::pow(static_cast<double>(g[i]) - c[i], 2);
        size += std::pow(static_cast<double>(c[i]) - start[i], 2);
      }
      EXPECT_LT(std::sqrt(diff / size), 0.15) << info.name << ": the TF32 update differs from the fp32 one";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fp32AndTf32, GPT2OnCuda, ::testing::Bool(),
                         [](const auto& info) { return info.param ? std::string("tf32") : std::string("fp32"); });

}  // namespace
}  // namespace lab
