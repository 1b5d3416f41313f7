// Pipeline schedules run against each other in simulated time: the check that every stage's list meets its
// neighbours' (no deadlock, messages in the order both sides expect), and the timeline whose idle time is the
// bubble, on made-up costs.
//
// The rules are the executor's (stage.h): a stage runs its actions in order; a forward or a backward takes
// its fixed time; a transfer waits until both stages have reached it (a rendezvous, as a large MPI or NCCL
// message) and takes no time. The bubble of a timeline is measured as for a real step (bubble_fraction()),
// so the simulation also checks that measurement against the theory.
#pragma once

#include <vector>

#include "ch08_distributed/pp/schedule.h"

namespace lab::ch08::pp {

struct SimulatedPipeline {
  std::vector<double> busy_seconds;  // per stage: time spent in forwards and backwards
  double span_seconds = 0;           // from the step's start to the last stage's last action
};

// Simulates one step of `schedules` (stage 0's list first). Error(Internal) naming the stuck actions when
// the stages cannot all finish (a deadlock, or a transfer whose two sides name different micro-batches).
SimulatedPipeline simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules, double forward_seconds,
                                    double backward_seconds);

// The idle fraction of a step: the mean over stages of (span - busy) / span, where span is the step's
// length, from when all stages start to when the last one ends (the same for every stage).
double bubble_fraction(const std::vector<double>& busy_seconds, double span_seconds);

}  // namespace lab::ch08::pp
