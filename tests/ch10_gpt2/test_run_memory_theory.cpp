// Every rung's share of the memory theory (ch10_gpt2/run_memory_theory.h) against what the allocator counts over
// a training step of a tiny GPT-2 on the CPU: parameters, gradients and optimizer state exactly where theory is
// exact (the plain run, mixed precision's 16-bit copy, the recompute policies), the tied embedding's gradient
// under the optimizer in backward, and ZeRO's shards (one rank: the stage's formula, at most the formula with
// what is whole beside it); the activations at their peak from the stored ones up to what backward adds. The
// tensor- and pipeline-parallel ranks' share without processes: every rank's parameters those of its shard as
// common/nn/shard.h cuts it, every stage's micro-batches in flight those its schedule keeps, the stages'
// activations those of the whole model with a boundary activation received by each stage but the first, and the
// block that block recompute runs again one block of the rank's shard (test_run_memory_theory_mpi.cpp measures
// the ranks).
#include <gtest/gtest.h>

#include <cstdio>

#include "ch08_distributed/pp/schedule.h"
#include "ch10_gpt2/run_memory_theory.h"
#include "common/comm/single_process.h"
#include "common/nn/gpt2.h"
#include "tests/ch10_gpt2/run_memory_check.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::kTheoryRows;
using test::kTheorySeq;
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
  for (const auto policy : ch07::recompute_policies()) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    RunConfig config = tiny_theory_run(Device::cpu());
    config.rungs.recompute = policy;
    const StepMemory m = measure_step_memory(config);
    expect_model_state_is_the_theory(m);
    expect_activations_within_the_theory(m);
  }
}

// Every kernels and recompute choice with 16-bit activations, flash attention and either head: the forward keeps
// the theory's bytes exactly (chapter 6's fused MLP under selective recompute keeps GELU's input only, as the
// core's does; the chunked head keeps its input's gradient instead of the logits), and the parameters, gradients
// and optimizer state are the theory's (chapter 6's CPU epilogue widens the 16-bit weights as workspace).
TEST(RunMemoryTheory, EveryKernelsRecomputeAndHeadWith16BitActivations) {
  for (const ch06::Kernels kernels : {ch06::Kernels::Reference, ch06::Kernels::Fused})
    for (const auto policy : ch07::recompute_policies())
      for (const ch07::LmHead head : {ch07::LmHead::Full, ch07::LmHead::Chunked}) {
        RunConfig config = tiny_theory_run(Device::cpu());
        config.math = MathMode::BF16;
        config.rungs = {kernels, ch09::Attention::Flash, policy, true, head};
        SCOPED_TRACE(config.rungs.str());
        const StepMemory m = measure_step_memory(config);
        expect_model_state_is_the_theory(m);
        EXPECT_GE(m.peak_of(MemCategory::Activations), m.theory.of(MemCategory::Activations));
        comm::SingleProcessCommunicator world;
        const comm::ParallelContext context(world, config.parallel.layout);
        EXPECT_EQ(test::stored_activations_of_one_micro_batch(config, context),
                  kTheoryRows * kTheorySeq * m.theory.activation_bytes_per_token);
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

// The parameters of rank (tp rank, stage) as the model builds its shard: the whole model's parameters that the
// shard holds, each at its tensor-parallel shape.
int64_t shard_parameters(const GPT2Config& config, int tp, int tp_rank, int stage, int stages) {
  const ModelShard shard = ModelShard::of_rank(config, tp_rank, tp, stage, stages);
  int64_t n = 0;
  for (const GPT2Parameter& p : gpt2_parameters(config, config.padded_vocab_for(tp)))
    if (shard_holds(shard, config, p)) n += shape_numel(tp_shard_shape(p.shape, tp_split_of(p.name), tp));
  return n;
}

// 4 blocks of 4 heads (tp up to 4, pp up to 4, 3 stages of unequal blocks); the vocabulary 300 is padded to 384,
// and to 512 under tp 2 and 4.
GPT2Config layout_theory_model() {
  return test::tiny_gpt2_config(300, 4, 4, 32, 16);
}

TEST(RunMemoryTheory, EveryRankOfALayoutHoldsItsShardsParameters) {
  for (const int tp : {1, 2, 4})
    for (const int pp : {1, 2, 3, 4})
      for (int stage = 0; stage < pp; ++stage)
        for (int tp_rank = 0; tp_rank < tp; ++tp_rank) {
          SCOPED_TRACE(cat("tp rank ", tp_rank, " of ", tp, ", stage ", stage, " of ", pp));
          RunConfig config = tiny_theory_run(Device::cpu());
          config.model = layout_theory_model();
          config.parallel.layout = {1, tp, pp};
          const ch07::MemoryTheory t = run_memory_theory(config, kTheoryRows, kTheorySeq, {0, tp_rank, stage});
          const int64_t held = shard_parameters(config.model, tp, tp_rank, stage, pp);
          EXPECT_EQ(t.parameters, held);
          EXPECT_EQ(t.of(MemCategory::Params), 4 * held);
          EXPECT_EQ(t.of(MemCategory::Grads), 4 * held);
          EXPECT_EQ(t.of(MemCategory::Optimizer), 8 * held);
          config.math = MathMode::BF16;  // the matmuls' 16-bit copy of the rank's flat buffer
          EXPECT_EQ(run_memory_theory(config, kTheoryRows, kTheorySeq, {0, tp_rank, stage}).of(MemCategory::Params),
                    6 * held);
        }
}

TEST(RunMemoryTheory, EveryStageHoldsTheMicroBatchesItsScheduleKeepsInFlight) {
  RunConfig config = tiny_theory_run(Device::cpu());
  for (const ch08::PpSchedule schedule : {ch08::PpSchedule::GPipe, ch08::PpSchedule::OneFOneB})
    for (int stages = 1; stages <= 4; ++stages)
      for (int64_t micro_batches = 1; micro_batches <= 8; ++micro_batches)
        for (int stage = 0; stage < stages; ++stage) {
          config.parallel.layout = {1, 1, stages};
          config.parallel.pp_schedule = schedule;
          config.parallel.micro_batches = micro_batches;
          const int expected = stages == 1 ? 1
                                           : ch08::pp::peak_live_micro_batches(ch08::pp::pipeline_schedule(
                                                 schedule, stage, stages, static_cast<int>(micro_batches)));
          EXPECT_EQ(micro_batches_in_flight(config, stage), expected)
              << ch08::pp_schedule_name(schedule) << ", stage " << stage << " of " << stages << ", " << micro_batches
              << " micro-batches";
        }
}

// Per token of a micro-batch, the stages of a pipeline keep what the whole model keeps, plus the boundary
// activation [C] that each stage but the first receives; every recompute policy.
TEST(RunMemoryTheory, ThePipelinesStagesKeepTheWholeModelsActivationsAndTheirBoundaries) {
  for (const auto policy : ch07::recompute_policies()) {
    SCOPED_TRACE(ch07::recompute_policy_name(policy));
    RunConfig config = tiny_theory_run(Device::cpu());
    config.model = layout_theory_model();
    config.rungs.recompute = policy;
    const ch07::MemoryTheory whole = run_memory_theory(config, kTheoryRows, kTheorySeq);
    for (const int pp : {2, 3, 4}) {
      config.parallel.layout = {1, 1, pp};
      int64_t per_token = 0;
      for (int stage = 0; stage < pp; ++stage) {
        const ch07::MemoryTheory t = run_memory_theory(config, kTheoryRows, kTheorySeq, {0, 0, stage});
        per_token += t.activation_bytes_per_token;
        EXPECT_EQ(t.recomputed_block_bytes, whole.recomputed_block_bytes);
      }
      EXPECT_EQ(per_token, whole.activation_bytes_per_token + (pp - 1) * config.model.n_embd * 4) << pp << " stages";
    }
  }
}

// Block recompute runs one block of the rank's shard again during its backward: what the same rank's block keeps
// without recompute (test_run_memory_theory_mpi measures that one exactly), at its tensor-parallel width.
TEST(RunMemoryTheory, BlockRecomputeRecomputesOneBlockOfTheRanksShard) {
  for (const int tp : {1, 2, 4})
    for (const int pp : {1, 2}) {
      SCOPED_TRACE(cat("tp ", tp, ", pp ", pp));
      RunConfig config = tiny_theory_run(Device::cpu());
      config.model = layout_theory_model();
      config.parallel.layout = {1, tp, pp};
      const ch07::MemoryTheory none = run_memory_theory(config, kTheoryRows, kTheorySeq);
      config.rungs.recompute = ch07::RecomputePolicy::Block;
      const ch07::MemoryTheory block = run_memory_theory(config, kTheoryRows, kTheorySeq);
      EXPECT_EQ(block.recomputed_block_bytes,
                kTheoryRows * kTheorySeq *
                    (none.activation_elements_per_token_per_block * 4 + none.attention_bytes_per_token_per_block));
      EXPECT_EQ(block.activation_elements_per_token_per_block, config.model.n_embd);  // the block's input, whole
    }
}

}  // namespace
}  // namespace lab
