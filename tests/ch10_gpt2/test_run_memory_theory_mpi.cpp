// Each rank of a tensor- and pipeline-parallel run against run_memory_theory's theory of that rank, under mpirun
// (label mpi): tp 2, pp 2 with GPipe and with 1F1B, tp 2 with block recompute and with flash attention, and pp 2
// with block recompute, on 2 ranks; tp 2 x pp 2 with each schedule on 4 (a layout that does not fit the job is
// skipped). The run is test_run_memory_theory's tiny GPT-2 on the CPU, whose allocator counts the bytes asked for:
// every rank's parameters, gradients and optimizer state are its theory exactly (its slice of the split tensors,
// the whole replicated ones, wte on the first and on the last stage, wpe on the first, ln_f on the last); the
// activations one micro-batch leaves stored after the rank's part of the forward are its theory exactly; and the
// activation peak over a step lies between what its theory stores (the stage's micro-batches in flight: 4 under
// GPipe, 2 on the first stage and 1 on the last under 1F1B) and that plus what backward adds at its peak (at most
// one micro-batch's block: backward_in_flight_bound).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ch10_gpt2/run_memory_theory.h"
#include "common/dist/rank_coordination.h"
#include "tests/ch10_gpt2/run_memory_check.h"
#include "tests/common/comm/mpi_test.h"

namespace lab {
namespace {

using ch08::PpSchedule;

// Micro-batches per pipeline step: more than the stages, so that GPipe's stages hold more than 1F1B's.
constexpr int64_t kMicroBatches = 4;

// What backward adds at its peak to the stored activations (and, under block recompute, to the block recomputed):
// the gradients in flight of the block it runs, each the shape of an activation the block keeps (a few [B, T, C],
// [B, T, 4C / T], the probabilities' [B, H / T, T, T]), and in a pipeline the boundary gradient received and the
// next micro-batch's activation, which arrives before the last gradient leaves. At most one micro-batch's whole
// block as the rank keeps it without recompute (at most 0.54 of it measured, on the first stage of a pipeline
// without tensor parallelism, whose block's [B, T, 4C] gradients are whole).
int64_t backward_in_flight_bound(RunConfig config, const comm::ParallelCoords& rank) {
  config.rungs.recompute = ch07::RecomputePolicy::None;
  const ch07::MemoryTheory none = run_memory_theory(config, test::kTheoryRows, test::kTheorySeq, rank);
  return test::kTheoryRows * test::kTheorySeq *
         (none.activation_elements_per_token_per_block * 4 + none.attention_bytes_per_token_per_block);
}

struct TheoryLayout {
  comm::ParallelLayout layout;
  PpSchedule schedule = PpSchedule::OneFOneB;
  ModelRungs rungs;
  std::string name() const {
    std::string name = cat("tp", layout.tp, "_pp", layout.pp);
    if (layout.pp > 1) name += cat("_", ch08::pp_schedule_name(schedule));
    if (rungs.recompute != ch07::RecomputePolicy::None) name += cat("_", ch07::recompute_policy_name(rungs.recompute));
    if (rungs.attention != ch09::Attention::Materialized) name += cat("_", ch09::attention_name(rungs.attention));
    return name;
  }
};

using RankMemory = testing::LayoutTest<TheoryLayout>;

TEST_P(RankMemory, IsTheTheoryOfThatRank) {
  const TheoryLayout& c = GetParam();
  RunConfig config = test::tiny_theory_run(Device::cpu());
  config.parallel.layout = c.layout;
  config.parallel.pp_schedule = c.schedule;
  config.rungs = c.rungs;
  if (c.layout.pp > 1) config.parallel.micro_batches = config.step.accum_steps = kMicroBatches;
  const comm::ParallelContext context(*world_, c.layout);
  const test::StepMemory m = test::measure_step_memory(config, context);
  const comm::ParallelCoords& rank = context.coords();

  for (const MemCategory k : {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer})
    EXPECT_EQ(m.peak_of(k), m.theory.of(k))
        << mem_category_name(k) << " on tp rank " << rank.tp << ", stage " << rank.pp;
  // One micro-batch's stored activations are the theory's exactly; at its peak the stage holds those of its
  // micro-batches in flight, and what backward adds.
  EXPECT_EQ(test::stored_activations_of_one_micro_batch(config, context),
            test::kTheoryRows * test::kTheorySeq * m.theory.activation_bytes_per_token)
      << "tp rank " << rank.tp << ", stage " << rank.pp;
  const auto stored = static_cast<double>(m.theory.of(MemCategory::Activations));
  const auto peak = static_cast<double>(m.peak_of(MemCategory::Activations));
  EXPECT_GE(peak, stored) << "tp rank " << rank.tp << ", stage " << rank.pp;
  const auto in_flight = static_cast<double>(backward_in_flight_bound(config, rank));
  EXPECT_LE(peak, stored + static_cast<double>(m.theory.recomputed_block_bytes) + in_flight)
      << "tp rank " << rank.tp << ", stage " << rank.pp;

  // Measured / theory per category (gather_lines keeps 255 bytes of each rank's line).
  const auto of = [&](MemCategory k) { return cat(m.peak_of(k), "/", m.theory.of(k)); };
  const std::string line =
      cat(c.name(), " tp ", rank.tp, " pp ", rank.pp, ": params ", of(MemCategory::Params), " grads ",
          of(MemCategory::Grads), " optimizer ", of(MemCategory::Optimizer), " activations ",
          of(MemCategory::Activations), " (", micro_batches_in_flight(config, rank.pp), " in flight), over it ",
          static_cast<int>((peak - stored - static_cast<double>(m.theory.recomputed_block_bytes)) / in_flight * 1000) /
              1000.0,
          " of a block");
  for (const std::string& l : dist::gather_lines(*world_, line))
    if (world_->rank() == 0) std::printf("%s\n", l.c_str());
}

// tp x pp on one data-parallel rank, the model's rungs by their flags' values.
TheoryLayout theory_layout(int tp, int pp, PpSchedule schedule = PpSchedule::OneFOneB,
                           const std::string& attention = "materialized", const std::string& recompute = "none") {
  return {{1, tp, pp}, schedule, ModelRungs::parse("reference", attention, recompute)};
}

INSTANTIATE_TEST_SUITE_P(Layouts, RankMemory,
                         ::testing::Values(theory_layout(2, 1), theory_layout(1, 2, PpSchedule::GPipe),
                                           theory_layout(1, 2),
                                           theory_layout(2, 1, PpSchedule::OneFOneB, "materialized", "block"),
                                           theory_layout(2, 1, PpSchedule::OneFOneB, "flash"),
                                           theory_layout(1, 2, PpSchedule::GPipe, "materialized", "block"),
                                           theory_layout(2, 2, PpSchedule::GPipe), theory_layout(2, 2)),
                         [](const ::testing::TestParamInfo<TheoryLayout>& info) { return info.param.name(); });

}  // namespace
}  // namespace lab
