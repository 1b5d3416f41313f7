// Every rung's share of the memory theory (ch10_gpt2/run_memory_theory.h) against what the allocator counts over
// a training step of a tiny GPT-2 on the CPU: parameters, gradients and optimizer state exactly where theory is
// exact (the plain run, mixed precision's 16-bit copy, the recompute policies), the tied embedding's gradient
// under the optimizer in backward, and ZeRO's shards (one rank: the stage's formula, at most the formula with
// what is whole beside it); the activations at their peak from the stored ones up to what backward adds.
#include <gtest/gtest.h>

#include <cstdio>

#include "ch10_gpt2/run_memory_theory.h"
#include "tests/ch10_gpt2/run_memory_check.h"

namespace lab {
namespace {

using test::measure_step_memory;
using test::StepMemory;
using test::tiny_theory_run;

void expect_model_state_is_the_theory(const StepMemory& m) {
  for (const MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer})
    EXPECT_EQ(m.peak_of(c), m.theory.of(c)) << mem_category_name(c);
}

// The stored activations are the formula's; the peak adds what backward holds in flight at its peak (and, for
// block recompute, the one block recomputed): at most a third more at this size.
void expect_activations_within_the_theory(const StepMemory& m) {
  const auto theory = static_cast<double>(m.theory.of(MemCategory::Activations) + m.theory.recomputed_block_bytes);
  const auto peak = static_cast<double>(m.peak_of(MemCategory::Activations));
  EXPECT_GE(peak, static_cast<double>(m.theory.of(MemCategory::Activations)));
  EXPECT_LE(peak, 1.34 * theory);
  std::printf("activations: peak %.0f bytes, theory %.0f (+ recomputed block), peak/theory %.3f\n", peak, theory,
              peak / theory);
}

TEST(RunMemoryTheory, ThePlainRunAndEachRecomputePolicy) {
  for (const auto policy :
       {ch07::RecomputePolicy::None, ch07::RecomputePolicy::Selective, ch07::RecomputePolicy::Block}) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    RunConfig config = tiny_theory_run(Device::cpu());
    config.rungs.recompute = policy;
    const StepMemory m = measure_step_memory(config);
    expect_model_state_is_the_theory(m);
    expect_activations_within_the_theory(m);
  }
}

TEST(RunMemoryTheory, MixedPrecisionAddsTheMatmulsCopy) {
  RunConfig config = tiny_theory_run(Device::cpu());
  config.math = MathMode::BF16;
  const StepMemory m = measure_step_memory(config);
  expect_model_state_is_the_theory(m);
  EXPECT_EQ(m.theory.of(MemCategory::Params), m.theory.parameters * 6);
}

TEST(RunMemoryTheory, TheOptimizerInBackwardKeepsTheTiedEmbeddingsGradient) {
  RunConfig config = tiny_theory_run(Device::cpu());
  config.memory.optimizer_in_backward = true;
  const StepMemory m = measure_step_memory(config);
  const int64_t wte = config.model.padded_vocab_for(1) * config.model.n_embd * 4;
  EXPECT_EQ(m.theory.of(MemCategory::Grads), wte);
  // At its peak: wte's gradient and those of the backward step running, far below the whole buffer.
  const int64_t whole = m.theory.parameters * 4;
  EXPECT_GE(m.peak_of(MemCategory::Grads), wte);
  EXPECT_LT(m.peak_of(MemCategory::Grads), wte + (whole - wte) / 2);
  EXPECT_EQ(m.peak_of(MemCategory::Params), m.theory.of(MemCategory::Params));
  EXPECT_EQ(m.peak_of(MemCategory::Optimizer), m.theory.of(MemCategory::Optimizer));
}

TEST(RunMemoryTheory, ZeroStagesOnOneRankHoldTheFormulaAndAtMostWhatIsWholeBesideIt) {
  for (const int stage : {1, 2, 3}) {
    SCOPED_TRACE(stage);
    RunConfig config = tiny_theory_run(Device::cpu());
    config.memory.zero = stage;
    config.parallel.layout = {1, 1, 1};
    config.parallel.bucket_bytes = 16 << 10;
    const StepMemory m = measure_step_memory(config);
    int64_t measured = 0, theory = 0;
    for (const MemCategory c : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer}) {
      measured += m.peak_of(c);
      theory += m.theory.of(c);
      EXPECT_LE(m.peak_of(c), m.theory.of(c)) << mem_category_name(c);
    }
    // One rank shards nothing: the state is 16 bytes a parameter, and what stages 2 and 3 hold whole beside the
    // shards comes on top of it at most.
    EXPECT_GE(measured, 16 * m.theory.parameters);
    EXPECT_LE(measured, theory);
    std::printf("zero %d: measured %lld bytes, theory %lld\n", stage, static_cast<long long>(measured),
                static_cast<long long>(theory));
  }
}

}  // namespace
}  // namespace lab
