// Activation recompute on the CPU: the same ops in the same order, so losses and gradients are bitwise those of
// no recompute (with one exception, a LayerNorm output recomputed after chapter 6's fused residual + LayerNorm in
// fp32: to rounding); gradient hooks still run once per parameter; block recompute keeps less than half the
// activations at the GPT-2 d12 shape (measured by the allocator); and block recompute recomputes the block hook
// installed before it.
#include <gtest/gtest.h>

#include "tests/ch07_memory/recompute/recompute_run.h"

namespace lab {
namespace {

using ch07::RecomputePolicy;

TEST(Recompute, EveryPolicyGivesBitwiseTheLossesAndGradientsOfNone) {
  const GPT2Config config = GPT2Config::from_name("tiny");
  const test::RecomputeRun none = test::run_with_recompute(config, Device::cpu(), RecomputePolicy::None, 3, 16);
  for (const RecomputePolicy policy :
       {RecomputePolicy::Selective, RecomputePolicy::SelectiveLayerNorm, RecomputePolicy::Block}) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    const test::RecomputeRun run = test::run_with_recompute(config, Device::cpu(), policy, 3, 16);
    EXPECT_EQ(run.losses, none.losses);
    EXPECT_EQ(run.grads, none.grads);
    EXPECT_EQ(run.hooks_run, none.hooks_run);
    EXPECT_LT(run.activation_peak, none.activation_peak);
  }
  EXPECT_GT(none.hooks_run, 0);
}

TEST(Recompute, EveryPolicyIsBitwiseNoneUnder16BitMatmulsAndActivations) {
  // Selective recompute widens the 16-bit qkv for the probabilities as the core's attention does, and recomputes
  // the GELU output in the activations' dtype with the same kernel, so each dropped tensor comes back bit for bit.
  const GPT2Config config = GPT2Config::from_name("tiny");
  for (const bool activations_16bit : {false, true}) {
    SCOPED_TRACE(activations_16bit ? "bf16 activations" : "fp32 activations");
    const test::RecomputeRun none = test::run_with_recompute(config, Device::cpu(), RecomputePolicy::None, 3, 16, true,
                                                             DType::BF16, activations_16bit);
    for (const RecomputePolicy policy :
         {RecomputePolicy::Selective, RecomputePolicy::SelectiveLayerNorm, RecomputePolicy::Block}) {
      SCOPED_TRACE(ch07::recompute_policy_name(policy));
      const test::RecomputeRun run =
          test::run_with_recompute(config, Device::cpu(), policy, 3, 16, true, DType::BF16, activations_16bit);
      EXPECT_EQ(run.losses, none.losses);
      EXPECT_EQ(run.grads, none.grads);
      EXPECT_LT(run.activation_peak, none.activation_peak);
    }
  }
}

TEST(Recompute, TheLayerNormsOutputsComeBackAfterChapter6sFusedResidualLayerNorm) {
  // The fused block's ln_2 output comes from the residual add and LayerNorm fused; recomputed, it is the core's
  // LayerNorm on the sum. With 16-bit activations that is the fused op's bits (fused_residual_layernorm.h), so
  // selective-ln gives selective's losses and gradients bit for bit. In fp32 the fused op is a loop of its own,
  // whose bits are not promised to be the core LayerNorm's: the gradients are held to rounding.
  const GPT2Config config = GPT2Config::from_name("tiny");
  for (const bool activations_16bit : {false, true}) {
    SCOPED_TRACE(activations_16bit ? "bf16 activations" : "fp32");
    const DType matmul = activations_16bit ? DType::BF16 : DType::F32;
    const auto run = [&](RecomputePolicy policy) {
      return test::run_with_recompute(config, Device::cpu(), policy, 3, 16, true, matmul, activations_16bit,
                                      ch06::Kernels::Fused);
    };
    const test::RecomputeRun selective = run(RecomputePolicy::Selective);
    const test::RecomputeRun with_ln = run(RecomputePolicy::SelectiveLayerNorm);
    if (activations_16bit) {
      EXPECT_EQ(with_ln.losses, selective.losses);
      EXPECT_EQ(with_ln.grads, selective.grads);
    } else {
      EXPECT_EQ(with_ln.losses, selective.losses);  // the forward is the same
      EXPECT_LT(test::max_scaled_error(with_ln.grads, selective.grads, 1e-4), 1e-5);
    }
    EXPECT_EQ(with_ln.hooks_run, selective.hooks_run);
    EXPECT_LT(with_ln.activation_peak, selective.activation_peak);
  }
}

TEST(Recompute, BlockKeepsLessThanHalfTheActivationsAtTheD12Shape) {
  // GPT-2 124M's shape, one row of 32 tokens (a few seconds on two cores); the weights stay zero (the bytes do not
  // depend on them).
  const GPT2Config config = GPT2Config::from_name("d12");
  const int64_t none =
      test::run_with_recompute(config, Device::cpu(), RecomputePolicy::None, 1, 32, false).activation_peak;
  const int64_t block =
      test::run_with_recompute(config, Device::cpu(), RecomputePolicy::Block, 1, 32, false).activation_peak;
  EXPECT_LT(2 * block, none) << "block " << block << " bytes, none " << none << " bytes";
}

TEST(Recompute, BlockRecomputeWrapsTheBlockInstalledBeforeIt) {
  // A block hook installed first (chapter 6's fused block, here a counting one) is the block that block recompute
  // runs: once in forward, once again in backward, for each of the model's blocks; and the gradients are those
  // of that block without recompute.
  const GPT2Config config = GPT2Config::from_name("tiny");
  int calls = 0;
  ModelOptions options;
  options.block = [&calls](Tape& tape, const Block& block, const Var& x, const ModelOptions& o) {
    ++calls;
    return block_forward(tape, block, x, o);
  };
  ModelOptions recomputed = options;
  ch07::apply_recompute(recomputed, RecomputePolicy::Block);
  Rng rng(5);
  const Tensor tokens = test::random_ids({2, 8}, rng, config.vocab_size);
  std::vector<float> grads[2];
  int i = 0;
  for (const ModelOptions* o : {&options, &recomputed}) {
    calls = 0;
    GPT2 model(config, Device::cpu(), *o);
    model.init_weights(2);
    model.parameters().zero_grad();
    Tape tape;
    model.loss(tape, tokens, tokens);
    tape.backward();
    EXPECT_EQ(calls, (o == &recomputed ? 2 : 1) * config.n_layer);
    grads[i++] = model.parameters().grads().to_floats();
  }
  EXPECT_EQ(grads[1], grads[0]);
}

TEST(Recompute, PolicyNames) {
  for (const std::string& name : ch07::recompute_policy_names())
    EXPECT_EQ(ch07::recompute_policy_name(ch07::parse_recompute_policy(name)), name);
  EXPECT_THROW(ch07::parse_recompute_policy("layers"), Error);
}

}  // namespace
}  // namespace lab
