// GPT-2 as a whole on the CPU: finite-difference gradients of every parameter tensor, the padded
// vocabulary, initialisation, determinism, and the optimizer/schedule pieces around it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/autograd/functions.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/optim/lr_schedule.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

GPT2Config tiny_config() {
  return test::tiny_gpt2_config(/*vocab=*/23, /*layers=*/2, /*heads=*/2, /*width=*/16, /*block=*/8);
}

double mean_loss(const GPT2& model, const Tensor& tokens, const Tensor& targets) {
  Tape tape(false);
  const std::vector<float> losses = model.loss(tape, tokens, targets).to_floats();
  double s = 0;
  for (float l : losses) s += l;
  return s / static_cast<double>(losses.size());
}

// Every parameter's gradient against central differences of the loss, for the model built with `options`.
void expect_finite_difference_gradients(const ModelOptions& options) {
  GPT2 model(tiny_config(), Device::cpu(), options);
  model.init_weights(1);
  // Larger weights than GPT-2's 0.02 make every gradient large enough to measure by differences.
  {
    float* p = model.parameters().params().data<float>();
    for (int64_t i = 0; i < model.parameters().numel(); ++i) p[i] *= 5.0f;
  }
  Rng rng(2);
  const Tensor tokens = test::random_ids({2, 6}, rng, 23);
  const Tensor targets = test::random_ids({2, 6}, rng, 23);
  {
    Tape tape;
    model.loss(tape, tokens, targets);
    tape.backward();
  }
  auto loss = [&] { return mean_loss(model, tokens, targets); };
  for (const ParamInfo& p : model.parameters().infos()) {
    Tensor value = model.parameters().value(p.name);
    const std::vector<float> grad = model.parameters().grad(p.name).to_floats();
    // eps 3e-3: the fp32 loss's rounding (about 2e-7 of a loss near 4) over 2 eps stays near 4e-5, well under
    // atol; at eps 1e-3 that noise was a third of atol, and an -O2 build's summation order crossed it.
    test::expect_gradient_close(loss, value, grad, p.name, 3e-3, 3e-4, 1e-2, 6, rng);
  }
}

TEST(GPT2, FiniteDifferenceGradientsOfEveryParameter) {
  expect_finite_difference_gradients({});
}

TEST(GPT2, FiniteDifferenceGradientsOfEveryParameterWithFlashAttention) {
  ModelOptions options;
  options.attention = [](Tape& tape, const Var& qkv, int n_head) {
    return ag::flash_attention(tape, qkv, n_head, DType::F32);
  };
  expect_finite_difference_gradients(options);
}

TEST(GPT2, PaddedVocabularyRowsGetNoGradientAndStayZero) {
  GPT2Config c = tiny_config();
  GPT2 model(c, Device::cpu());
  model.init_weights(3);
  Rng rng(4);
  const Tensor tokens = test::random_ids({2, 8}, rng, c.vocab_size);
  AdamW opt(model.parameters(), {});
  for (int step = 0; step < 3; ++step) {
    model.parameters().zero_grad();
    Tape tape;
    model.loss(tape, tokens, tokens);
    tape.backward();
    opt.step(1e-2f);
  }
  const std::vector<float> wte = model.parameters().value("wte.weight").to_floats();
  const std::vector<float> dwte = model.parameters().grad("wte.weight").to_floats();
  for (int64_t i = int64_t{c.vocab_size} * c.n_embd; i < int64_t{c.padded_vocab_size} * c.n_embd; ++i) {
    ASSERT_EQ(wte[i], 0.0f) << i;
    ASSERT_EQ(dwte[i], 0.0f) << i;
  }
}

TEST(GPT2, InitialLossIsNearUniform) {
  GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  model.init_weights(5);
  Rng rng(6);
  const Tensor tokens = test::random_ids({2, 16}, rng, 50257);
  const Tensor targets = test::random_ids({2, 16}, rng, 50257);
  EXPECT_NEAR(mean_loss(model, tokens, targets), std::log(50257.0), 0.1);
}

TEST(GPT2, InitIsDeterministicAndSeedDependent) {
  GPT2 a(tiny_config(), Device::cpu()), b(tiny_config(), Device::cpu()), c(tiny_config(), Device::cpu());
  a.init_weights(7);
  b.init_weights(7);
  c.init_weights(8);
  EXPECT_EQ(a.parameters().params().to_floats(), b.parameters().params().to_floats());
  EXPECT_NE(a.parameters().params().to_floats(), c.parameters().params().to_floats());
  // GPT-2's scheme: unit LayerNorm gains, zero biases, residual projections at 0.02/sqrt(2L).
  EXPECT_EQ(a.parameters().value("h.1.ln_2.weight").to_floats(), std::vector<float>(16, 1.0f));
  EXPECT_EQ(a.parameters().value("h.0.attn.c_attn.bias").to_floats(), std::vector<float>(48, 0.0f));
  const std::vector<float> proj = a.parameters().value("h.0.mlp.c_proj.weight").to_floats();
  double var = 0;
  for (float x : proj) var += double(x) * x / proj.size();
  EXPECT_NEAR(std::sqrt(var), 0.02 / std::sqrt(4.0), 0.002);
}

// The flat buffers hold the parameters in the order backward completes their gradients (data-parallel buckets
// fill while backward runs): ln_f first, then the blocks from the last to the first, each in reverse order of
// use, then wpe and wte (tied to the LM head, final only after the embedding's backward, at the very end).
TEST(GPT2, ParameterLayoutIsTheOrderOfBackward) {
  GPT2 model(tiny_config(), Device::cpu());
  const ParameterStore& p = model.parameters();
  EXPECT_EQ(p.order(), ParameterOrder::Backward);
  std::vector<const ParamInfo*> by_offset;
  for (const ParamInfo& info : p.infos()) {
    EXPECT_EQ(info.decay, info.shape.size() == 2) << info.name;
    EXPECT_EQ(info.offset % 32, 0) << info.name;
    by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ParamInfo* a, const ParamInfo* b) { return a->offset < b->offset; });
  std::vector<std::string> names;
  for (const ParamInfo* info : by_offset) names.push_back(info->name);
  const std::vector<std::string> last_block = {
      "h.1.mlp.c_proj.bias",  "h.1.mlp.c_proj.weight",  "h.1.mlp.c_fc.bias",    "h.1.mlp.c_fc.weight",
      "h.1.ln_2.bias",        "h.1.ln_2.weight",        "h.1.attn.c_proj.bias", "h.1.attn.c_proj.weight",
      "h.1.attn.c_attn.bias", "h.1.attn.c_attn.weight", "h.1.ln_1.bias",        "h.1.ln_1.weight"};
  ASSERT_EQ(names.size(), 2 + 2 * last_block.size() + 2);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 2),
            (std::vector<std::string>{"ln_f.bias", "ln_f.weight"}));
  EXPECT_EQ(std::vector<std::string>(names.begin() + 2, names.begin() + 14), last_block);
  EXPECT_EQ(names[14], "h.0.mlp.c_proj.bias");
  EXPECT_EQ(std::vector<std::string>(names.end() - 2, names.end()),
            (std::vector<std::string>{"wpe.weight", "wte.weight"}));
  // Weight decay by ranges: exactly the 2-D weights (wpe and wte are neighbours: one range).
  int64_t decayed = 0;
  for (const ElementRange& r : p.decay_ranges()) decayed += r.size();
  int64_t expected = 0;
  for (const ParamInfo& info : p.infos())
    if (info.decay) expected += info.numel();
  EXPECT_EQ(p.decay_ranges().size(), 2u * 4 + 1);
  EXPECT_EQ(decayed,
            expected + (p.info("wte.weight").offset - p.info("wpe.weight").offset - p.info("wpe.weight").numel()));
  EXPECT_EQ(GPT2Config::from_name("d12").num_parameters(), 124439808);  // GPT-2 small, as published
}

TEST(GPT2, SequenceLongerThanBlockIsRejected) {
  GPT2 model(tiny_config(), Device::cpu());
  Rng rng(9);
  Tape tape(false);
  EXPECT_THROW(model.logits(tape, test::random_ids({1, 9}, rng, 23)), Error);
}

TEST(LrSchedule, WarmupThenCosineToMinimum) {
  LrSchedule s;
  s.kind = LrSchedule::Kind::Cosine;
  s.max_lr = 1.0;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.min_lr_fraction = 0.1;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  s.kind = LrSchedule::Kind::Linear;
  EXPECT_NEAR(s.at(60), 0.55, 1e-12);
  s.kind = LrSchedule::Kind::Constant;
  EXPECT_DOUBLE_EQ(s.at(100), 1.0);
  EXPECT_THROW(LrSchedule::parse_kind("exponential"), Error);
}

TEST(Clipping, CoefficientFollowsPyTorch) {
  EXPECT_FLOAT_EQ(clip_coefficient(2.0, 1.0), static_cast<float>(1.0 / (2.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_coefficient(100.0, 0.0), 1.0f);  // 0 = off
}

}  // namespace
}  // namespace lab
