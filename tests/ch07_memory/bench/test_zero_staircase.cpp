// The ZeRO staircase under mpirun (2 ranks) at a tiny size (chapter 7's small step model, whose tied embedding
// is small beside its blocks; seq 16, one timed step per rung, buckets of 4 KiB so that the bucket being filled
// is small beside the shards): one change per rung; the measured parameters + gradients + optimizer state fall
// from data parallelism to stage 1 to stage 2 to stage 3, each at least the stage's formula (16Ψ, 8Ψ + 8Ψ/D,
// 4Ψ + 12Ψ/D, 16Ψ/D) and within 1.15x of it plus what theory holds whole beside the shards
// (zero/zero_theory.h); stage 3 with prefetch holds one block more than without; the largest peak over the ranks
// is at least this rank's.
#include <gtest/gtest.h>

#include <cstdio>

#include "ch07_memory/bench/zero_staircase.h"
#include "common/core/parallel.h"
#include "tests/ch07_memory/step_fixture.h"
#include "tests/common/comm/mpi_test.h"

namespace lab::ch07 {
namespace {

ZeroBenchConfig tiny_config() {
  ZeroBenchConfig c;
  c.memory.model = "small-step-test";
  c.model_config = testing::small_step_config();
  c.memory.batch = 4;
  c.memory.seq = 16;
  c.memory.micro_batches = 2;
  c.memory.steps = 1;
  c.bucket_mb = 4.0 / 1024;
  return c;
}

TEST(ZeroStaircase, TheRungsChangeOnlyTheStage) {
  const staircase::Staircase stairs = zero_staircase(tiny_config(), 2);
  EXPECT_TRUE(staircase::check_one_change_per_rung(stairs).empty());
  std::vector<std::string> stages;
  for (const staircase::Rung& r : stairs.rungs)
    stages.push_back(staircase::parse_settings(stairs.flags_for(r)).at("zero"));
  EXPECT_EQ(stages, (std::vector<std::string>{"0", "1", "2", "3", "3"}));
  EXPECT_EQ(staircase::parse_settings(stairs.flags_for(stairs.rungs.back())).at("zero-prefetch"), "true");
  // A global batch that does not split over the ranks' micro-batches is refused before anything runs.
  ZeroBenchConfig odd = tiny_config();
  odd.memory.micro_batches = 1;  // one micro-batch of 4 rows cannot go to 2 ranks
  EXPECT_THROW(zero_staircase(odd, 2), Error);
}

TEST(ZeroStaircase, ModelStateFallsFromRungToRungAsTheoryHasIt) {
  set_num_threads(1);  // the ranks share the machine's cores
  const std::unique_ptr<comm::Communicator> group = testing::fresh_communicator();
  const ZeroStaircaseReport zero = run_zero_staircase(*group, tiny_config());
  ASSERT_EQ(zero.report.rungs.size(), 5u);
  ASSERT_GT(zero.parameters, 0);
  std::vector<double> states;
  for (size_t rung = 0; rung < zero.report.rungs.size(); ++rung) {
    const staircase::RungReport& r = zero.report.rungs[rung];
    ASSERT_TRUE(r.ran) << r.rung.name << ": " << r.error;
    const double state = r.find("state_MiB")->summary.median;
    const double theory = zero.theory[rung].total() / (1 << 20);
    EXPECT_LE(state, 1.15 * theory) << r.rung.name << " on rank " << group->rank();
    EXPECT_GE(state, zero.theory[rung].sharded / (1 << 20)) << r.rung.name << " on rank " << group->rank();
    if (rung > 0 && rung <= 3) {
      EXPECT_LT(state, states.back()) << r.rung.name;
    }
    if (rung == 4) {
      EXPECT_GT(state, states.back()) << "prefetch holds the next block beside the current one";
    }
    states.push_back(state);
    EXPECT_GE(r.find("max_rank_peak_MiB")->summary.median, r.find("peak_MiB")->summary.median);
    if (group->rank() == 0)
      std::printf("%s: %.3f MiB of params + grads + optimizer, theory %.3f MiB (%s)\n", r.rung.name.c_str(), state,
                  theory, zero.theory[rung].whole_str().c_str());
  }
}

}  // namespace
}  // namespace lab::ch07
