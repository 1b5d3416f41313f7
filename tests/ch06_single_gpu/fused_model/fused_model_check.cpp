#include "tests/ch06_single_gpu/fused_model/fused_model_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "ch06_single_gpu/fused_model.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

// Small, with shapes off the kernels' block sizes: B*T = 14 rows, a vocabulary of 301 padded to 384. C = 64 keeps
// the fused LayerNorm on its register-row path (C a multiple of 4).
GPT2Config small_config() {
  return test::tiny_gpt2_config(/*vocab=*/301, /*layers=*/2, /*heads=*/2, /*width=*/64, /*block=*/16);
}
constexpr int64_t kBatch = 2, kSeq = 7;
constexpr double kLr = 1e-3;

Tensor random_tokens(uint64_t seed, int64_t vocab, Device device) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(kBatch * kSeq));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  return Tensor::from_ints(ids, {kBatch, kSeq}, device);
}

GPT2 make_model(Device device, ch06::Kernels kernels, DType activations = DType::F32) {
  ModelOptions options = ch06::with_kernels({}, kernels);
  options.activations = activations;
  GPT2 model(small_config(), device, options);
  model.init_weights(7);
  return model;
}

// fp32 sums of up to `length` terms in different orders: a few times the usual rounding of such sums. Mixed
// precision is held to the same: both models round the same values to 16 bits, and only fp32 ops differ.
Tolerance fp32_tolerance(int64_t length) {
  Tolerance tol = tolerance_for(DType::F32, length);
  tol.rel *= 4;
  tol.abs *= 4;
  return tol;
}

}  // namespace

void expect_fused_matches_reference(Device device, DType matmul_dtype) {
  const GPT2Config config = small_config();
  GPT2 reference = make_model(Device::cpu(), ch06::Kernels::Reference);
  GPT2 fused = make_model(device, ch06::Kernels::Fused);
  reference.set_matmul_dtype(matmul_dtype);
  fused.set_matmul_dtype(matmul_dtype);
  const Tensor tokens = random_tokens(11, config.vocab_size, Device::cpu());
  const Tensor targets = random_tokens(12, config.vocab_size, Device::cpu());
  const int64_t hidden = 4 * config.n_embd;

  {
    Tape ref_tape(false), fused_tape(false);
    EXPECT_TRUE(all_close("logits", fused.logits(fused_tape, tokens.to(device)).value(),
                          reference.logits(ref_tape, tokens).value(), fp32_tolerance(hidden)));
  }

  Tape ref_tape, fused_tape;
  const Tensor ref_losses = reference.loss(ref_tape, tokens, targets);
  const Tensor fused_losses = fused.loss(fused_tape, tokens.to(device), targets.to(device));
  EXPECT_TRUE(all_close("losses", fused_losses, ref_losses, fp32_tolerance(config.padded_vocab_size)));
  reference.parameters().zero_grad();
  fused.parameters().zero_grad();
  ref_tape.backward();
  fused_tape.backward();
  // Weight gradients sum over the B*T rows, input gradients over up to 4C outputs.
  for (const auto& info : reference.parameters().infos())
    EXPECT_TRUE(all_close(info.name.c_str(), fused.parameters().grad(info.name), reference.parameters().grad(info.name),
                          fp32_tolerance(hidden + kBatch * kSeq)));
}

void expect_fused_matches_reference_in_16bit(Device device, DType dtype) {
  const GPT2Config config = small_config();
  GPT2 reference = make_model(Device::cpu(), ch06::Kernels::Reference, dtype);
  GPT2 fused = make_model(device, ch06::Kernels::Fused, dtype);
  reference.set_matmul_dtype(dtype);
  fused.set_matmul_dtype(dtype);
  const Tensor tokens = random_tokens(21, config.vocab_size, Device::cpu());
  const Tensor targets = random_tokens(22, config.vocab_size, Device::cpu());
  Tape ref_tape, fused_tape;
  const std::vector<float> ref_losses = reference.loss(ref_tape, tokens, targets).to_floats();
  const std::vector<float> fused_losses = fused.loss(fused_tape, tokens.to(device), targets.to(device)).to_floats();
  reference.parameters().zero_grad();
  fused.parameters().zero_grad();
  ref_tape.backward();
  fused_tape.backward();
  // The two models round the same values to 16 bits but in the MLP, whose epilogues round once where the reference
  // rounds twice (fused_functions.h): a 16-bit ulp here and there, carried through two blocks forward and back.
  const double tol = dtype == DType::BF16 ? 2e-2 : 4e-3;
  const double loss_error = max_scaled_error(fused_losses, ref_losses, 1e-3);
  std::printf("%s, %s activations: losses %.2e apart (scaled)\n", device.str().c_str(), dtype_name(dtype), loss_error);
  EXPECT_LT(loss_error, 0.1 * tol);
  double worst = 0;
  for (const auto& info : reference.parameters().infos()) {
    const double error = max_scaled_error(fused.parameters().grad(info.name).to_floats(),
                                          reference.parameters().grad(info.name).to_floats(), 1e-4);
    worst = std::max(worst, error);
    EXPECT_LT(error, tol) << info.name << ", " << dtype_name(dtype);
  }
  std::printf("  gradients at most %.2e apart (scaled by each parameter's largest)\n", worst);
}

void expect_fused_training_tracks_reference(Device device) {
  const GPT2Config config = small_config();
  GPT2 reference = make_model(Device::cpu(), ch06::Kernels::Reference);
  GPT2 fused = make_model(device, ch06::Kernels::Fused);
  AdamW ref_opt(reference.parameters(), {}), fused_opt(fused.parameters(), {});
  TrainStep ref_step(reference, ref_opt, {}), fused_step(fused, fused_opt, {});
  constexpr int kSteps = 4;
  for (int step = 0; step < kSteps; ++step) {
    const Tensor tokens = random_tokens(100 + step, config.vocab_size, Device::cpu());
    const Tensor targets = random_tokens(200 + step, config.vocab_size, Device::cpu());
    const TrainStepResult ref = ref_step.run([&] { return MicroBatch{tokens, targets}; }, kLr);
    const TrainStepResult got = fused_step.run([&] { return MicroBatch{tokens.to(device), targets.to(device)}; }, kLr);
    EXPECT_NEAR(got.loss, ref.loss, 1e-5 * ref.loss) << "step " << step;
    EXPECT_NEAR(got.grad_norm, ref.grad_norm, 1e-4 * ref.grad_norm) << "step " << step;
  }
  // Each update moves a weight by at most about lr: the weights must agree within 1% of lr (as the distributed
  // tests hold their layouts to), all but a few in a thousand. Those few are weights whose gradient is close to
  // zero: AdamW divides it by its own magnitude, so where rounding decides its sign, the two models step apart by
  // up to lr. The key third of c_attn's bias is all such weights (its gradient is zero in exact arithmetic: a
  // constant added to every score of a query leaves the softmax unchanged), so it is left out.
  const int64_t C = config.n_embd;
  for (const auto& info : reference.parameters().infos()) {
    const std::vector<float> got = fused.parameters().value(info.name).to_floats();
    const std::vector<float> want = reference.parameters().value(info.name).to_floats();
    const bool key_bias = info.name.ends_with("attn.c_attn.bias");
    size_t apart = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (!key_bias || i < static_cast<size_t>(C) || i >= static_cast<size_t>(2 * C))
        apart += std::fabs(static_cast<double>(got[i]) - want[i]) > 0.01 * kLr;
    EXPECT_LE(apart * 1000, want.size()) << info.name << ": " << apart << " weights apart by more than 1% of lr";
  }
}

}  // namespace lab::test
