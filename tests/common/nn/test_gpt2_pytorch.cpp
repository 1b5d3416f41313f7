// GPT-2 against PyTorch: logits, loss, every gradient and 10 AdamW steps of a tiny model, compared with the
// float64 reference that tools/pytorch_reference/make_gpt2_fixture.py wrote into fixtures/. Each comparison
// prints its worst error, so a regression shows by how much, not just that it happened.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/io/safetensors.h"
#include "common/nn/gpt2_weights.h"
#include "common/optim/adamw.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

const std::string kFixtures = std::string(LAB_SOURCE_DIR) + "/tests/common/nn/fixtures/";

class GPT2VsPyTorch : public ::testing::Test {
 protected:
  GPT2VsPyTorch() : ref_(kFixtures + "gpt2_tiny_reference.safetensors") {
    config_.n_layer = std::stoi(ref_.metadata_value("n_layer"));
    config_.n_head = std::stoi(ref_.metadata_value("n_head"));
    config_.n_embd = std::stoi(ref_.metadata_value("n_embd"));
    config_.block_size = std::stoi(ref_.metadata_value("block_size"));
    config_.vocab_size = std::stoi(ref_.metadata_value("vocab_size"));
    config_.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(config_.vocab_size));
    tokens_ = ref_.load("tokens");
    targets_ = ref_.load("targets");
  }

  // Loads param.<name> (the model's own layout) straight into the parameters.
  void load_reference_params(GPT2& model) {
    for (const ParamInfo& p : model.parameters().infos()) {
      Tensor dst = model.parameters().value(p.name);
      if (p.name == "wte.weight") dst = dst.slice_rows(0, config_.vocab_size);
      ref_.load_into("param." + p.name, dst);
    }
  }

  // The parameter's values restricted to the real vocabulary (wte's padded rows dropped).
  std::vector<float> real_rows(const Tensor& t, const std::string& name) {
    return (name == "wte.weight" ? t.slice_rows(0, config_.vocab_size) : t).to_floats();
  }

  double mean_loss(const Tensor& losses) {
    double s = 0;
    for (float l : losses.to_floats()) s += l;
    return s / static_cast<double>(losses.numel());
  }

  SafetensorsReader ref_;
  GPT2Config config_;
  Tensor tokens_, targets_;
};

TEST_F(GPT2VsPyTorch, LogitsLossAndEveryGradient) {
  GPT2 model(config_, Device::cpu());
  load_reference_params(model);
  {
    Tape tape(false);
    const Tensor logits = model.logits(tape, tokens_).value();  // [B, T, Vp]
    const int64_t rows = logits.numel() / config_.padded_vocab_size;
    std::vector<float> ours;
    const std::vector<float> all = logits.to_floats();
    for (int64_t r = 0; r < rows; ++r)
      ours.insert(ours.end(), all.begin() + r * config_.padded_vocab_size,
                  all.begin() + r * config_.padded_vocab_size + config_.vocab_size);
    const double err = test::max_scaled_error(ours, ref_.load("logits").to_floats());
    std::printf("logits: worst scaled error %.3g\n", err);
    EXPECT_LT(err, 1e-5);
  }
  Tape tape;
  const double loss = mean_loss(model.loss(tape, tokens_, targets_));
  tape.backward();
  const double ref_loss = ref_.load("loss").item();
  std::printf("loss: ours %.8f, PyTorch %.8f\n", loss, ref_loss);
  EXPECT_NEAR(loss, ref_loss, 1e-5 * ref_loss);
  double worst = 0;
  std::string worst_name;
  for (const ParamInfo& p : model.parameters().infos()) {
    const double err = test::max_scaled_error(real_rows(model.parameters().grad(p.name), p.name),
                                              ref_.load("grad." + p.name).to_floats());
    EXPECT_LT(err, 1e-4) << "gradient of " << p.name;
    if (err > worst) worst = err, worst_name = p.name;
  }
  std::printf("gradients: worst scaled error %.3g (%s) over %zu tensors\n", worst, worst_name.c_str(),
              model.parameters().infos().size());
}

TEST_F(GPT2VsPyTorch, HuggingFaceSafetensorsGiveTheSameLoss) {
  const std::string hf = kFixtures + "gpt2_tiny_hf.safetensors";
  EXPECT_EQ(read_gpt2_config(hf), config_);
  GPT2 direct(config_, Device::cpu()), imported(config_, Device::cpu());
  load_reference_params(direct);
  load_gpt2_weights(imported, hf);
  EXPECT_EQ(imported.parameters().params().to_floats(), direct.parameters().params().to_floats());
  Tape tape(false);
  const double loss = mean_loss(imported.loss(tape, tokens_, targets_));
  EXPECT_NEAR(loss, ref_.load("loss").item(), 1e-5);
}

TEST_F(GPT2VsPyTorch, TenAdamWStepsWithClipping) {
  GPT2 model(config_, Device::cpu());
  load_reference_params(model);
  AdamWConfig cfg;
  cfg.beta1 = std::stof(ref_.metadata_value("beta1"));
  cfg.beta2 = std::stof(ref_.metadata_value("beta2"));
  cfg.eps = std::stof(ref_.metadata_value("eps"));
  cfg.weight_decay = std::stof(ref_.metadata_value("weight_decay"));
  AdamW opt(model.parameters(), cfg);
  const float lr = std::stof(ref_.metadata_value("lr"));
  const double clip = std::stod(ref_.metadata_value("grad_clip"));
  const std::vector<float> ref_losses = ref_.load("adamw_losses").to_floats();
  const std::vector<float> ref_norms = ref_.load("adamw_grad_norms").to_floats();
  for (size_t step = 0; step < ref_losses.size(); ++step) {
    model.parameters().zero_grad();
    Tape tape;
    const double loss = mean_loss(model.loss(tape, tokens_, targets_));
    tape.backward();
    const double norm = global_grad_norm(model.parameters());
    opt.step(lr, clip_coefficient(norm, clip));
    std::printf("step %zu: loss %.6f (PyTorch %.6f), grad norm %.6f (PyTorch %.6f)\n", step, loss, ref_losses[step],
                norm, ref_norms[step]);
    EXPECT_NEAR(loss, ref_losses[step], 2e-5 * (1 + ref_losses[step])) << "step " << step;
    EXPECT_NEAR(norm, ref_norms[step], 1e-4 * (1 + ref_norms[step])) << "step " << step;
  }
  // Final weights, per tensor, judged by the error of the total update (final - initial) relative to its
  // size. Element by element would be ill-posed: Adam moves an element by about lr per step whatever the
  // size of its gradient, so an element whose gradient is ~1e-8 (there are some) moves in a direction
  // decided by rounding, in PyTorch and here alike. The key part of c_attn's bias is left out entirely:
  // softmax is invariant to it (q.(k+b) shifts a whole row of scores by q.b), so its exact gradient is
  // zero and only rounding noise drives it.
  const int64_t C = config_.n_embd;
  double worst = 0;
  std::string worst_name;
  for (const ParamInfo& p : model.parameters().infos()) {
    std::vector<float> ours = real_rows(model.parameters().value(p.name), p.name);
    std::vector<float> theirs = ref_.load("final." + p.name).to_floats();
    std::vector<float> initial = ref_.load("param." + p.name).to_floats();
    if (p.name.ends_with("attn.c_attn.bias")) {
      for (auto* v : {&ours, &theirs, &initial}) v->erase(v->begin() + C, v->begin() + 2 * C);
      const std::vector<float> key_grad = model.parameters().grad(p.name).view(C, {C}).to_floats();
      for (float g : key_grad) EXPECT_LT(std::fabs(g), 1e-6f) << "key-bias gradient must vanish in " << p.name;
    }
    double diff2 = 0, update2 = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      diff2 += (double(ours[i]) - theirs[i]) * (double(ours[i]) - theirs[i]);
      update2 += (double(theirs[i]) - initial[i]) * (double(theirs[i]) - initial[i]);
    }
    const double err = std::sqrt(diff2 / update2);
    EXPECT_LT(err, 1e-3) << "final weights of " << p.name;
    EXPECT_LT(test::max_abs_error(ours, theirs), 1e-3) << "final weights of " << p.name << " (10% of one step)";
    if (err > worst) worst = err, worst_name = p.name;
  }
  std::printf("weights after %zu steps: worst relative error of the update %.3g (%s)\n", ref_losses.size(), worst,
              worst_name.c_str());
}

}  // namespace
}  // namespace lab
