// Pipeline schedules without any process: the lists of GPipe and 1F1B for small pipelines written out,
// 1F1B's bound on the micro-batches a stage holds (P - stage, whatever M) against GPipe's M, every schedule
// of up to 8 stages and 16 micro-batches run against its neighbours in the simulator (no deadlock with
// blocking transfers), and the bubble measured on the simulated timeline against (P-1)/(M+P-1).
#include <gtest/gtest.h>

#include <algorithm>

#include "ch08_distributed/pp/schedule.h"
#include "ch08_distributed/pp/simulation.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using namespace ch08::pp;
using ch08::PpSchedule;

std::vector<std::vector<PipeAction>> every_stage(PpSchedule schedule, int P, int M) {
  std::vector<std::vector<PipeAction>> s;
  for (int stage = 0; stage < P; ++stage) s.push_back(pipeline_schedule(schedule, stage, P, M));
  return s;
}

TEST(PipelineSchedule, GPipeRunsEveryForwardThenEveryBackward) {
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::GPipe, 0, 2, 3)), "F0 sa0 F1 sa1 F2 sa2 rg0 B0 rg1 B1 rg2 B2");
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::GPipe, 1, 2, 3)), "ra0 F0 ra1 F1 ra2 F2 B0 sg0 B1 sg1 B2 sg2");
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::GPipe, 0, 1, 2)), "F0 F1 B0 B1");
}

TEST(PipelineSchedule, OneFOneBWarmsUpAlternatesAndDrains) {
  // Stage 0 of 3: two warm-up forwards, then one forward and one backward at a time, then the last backwards.
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::OneFOneB, 0, 3, 4)),
            "F0 sa0 F1 sa1 F2 sa2 rg0 B0 F3 sa3 rg1 B1 rg2 B2 rg3 B3");
  // The middle stage receives before it sends in each exchange with stage 0, sends before it receives in
  // each exchange with stage 2.
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::OneFOneB, 1, 3, 4)),
            "ra0 F0 sa0 ra1 F1 sa1 rg0 B0 ra2 sg0 F2 sa2 rg1 B1 ra3 sg1 F3 sa3 rg2 B2 sg2 rg3 B3 sg3");
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::OneFOneB, 2, 3, 4)),
            "ra0 F0 B0 ra1 sg0 F1 B1 ra2 sg1 F2 B2 ra3 sg2 F3 B3 sg3");
  // Fewer micro-batches than stages: the warm-up is cut short.
  EXPECT_EQ(schedule_str(pipeline_schedule(PpSchedule::OneFOneB, 0, 4, 2)), "F0 sa0 F1 sa1 rg0 B0 rg1 B1");
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostOneMicroBatchPerStageAhead) {
  for (int P = 1; P <= 8; ++P)
    for (int M = 1; M <= 16; ++M)
      for (int s = 0; s < P; ++s) {
        EXPECT_EQ(peak_live_micro_batches(pipeline_schedule(PpSchedule::OneFOneB, s, P, M)), std::min(P - s, M))
            << "stage " << s << " of " << P << ", " << M << " micro-batches";
        EXPECT_EQ(peak_live_micro_batches(pipeline_schedule(PpSchedule::GPipe, s, P, M)), M);
      }
}

TEST(PipelineSchedule, EveryScheduleMeetsItsNeighboursInOrder) {
  for (PpSchedule schedule : {PpSchedule::GPipe, PpSchedule::OneFOneB})
    for (int P = 1; P <= 8; ++P)
      for (int M = 1; M <= 16; ++M)
        EXPECT_NO_THROW(simulate_pipeline(every_stage(schedule, P, M), 1.0, 2.0))
            << ch08::pp_schedule_name(schedule) << ", " << P << " stages, " << M << " micro-batches";
}

TEST(PipelineSchedule, BubbleOfTheSimulatedStepIsTheTheory) {
  for (PpSchedule schedule : {PpSchedule::GPipe, PpSchedule::OneFOneB})
    for (const auto& [P, M] : std::vector<std::pair<int, int>>{{2, 1}, {2, 4}, {4, 4}, {4, 8}, {8, 3}, {3, 16}})
      for (double backward : {1.0, 2.0}) {
        const SimulatedPipeline sim = simulate_pipeline(every_stage(schedule, P, M), 1.0, backward);
        EXPECT_DOUBLE_EQ(sim.span_seconds, (M + P - 1) * (1.0 + backward));
        EXPECT_NEAR(bubble_fraction(sim.busy_seconds, sim.span_seconds), ideal_bubble_fraction(P, M), 1e-12)
            << ch08::pp_schedule_name(schedule) << ", " << P << " stages, " << M << " micro-batches";
      }
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(ideal_bubble_fraction(1, 8), 0.0);
}

TEST(PipelineSchedule, TheSimulatorFindsADeadlock) {
  // Both stages send first: with blocking transfers neither send is ever received.
  std::vector<std::vector<PipeAction>> s = every_stage(PpSchedule::OneFOneB, 2, 2);
  s[1] = {{PipeOp::RecvActivation, 0}, {PipeOp::Forward, 0}, {PipeOp::Backward, 0}, {PipeOp::SendGradient, 0},
          {PipeOp::RecvActivation, 1}, {PipeOp::Forward, 1}, {PipeOp::Backward, 1}, {PipeOp::SendGradient, 1}};
  testing::expect_error([&] { simulate_pipeline(s, 1.0, 1.0); }, ErrorKind::Internal,
                        {"deadlocks", "stage 0 at sa1", "stage 1 at sg0"});
}

TEST(PipelineSchedule, RejectsSizesOutOfRange) {
  testing::expect_error([&] { pipeline_schedule(PpSchedule::GPipe, 2, 2, 4); }, ErrorKind::InvalidArgument,
                        {"stage 2 of 2"});
  testing::expect_error([&] { pipeline_schedule(PpSchedule::OneFOneB, 0, 2, 0); }, ErrorKind::InvalidArgument,
                        {"at least one micro-batch"});
}

}  // namespace
}  // namespace lab
