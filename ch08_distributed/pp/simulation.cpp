// The pipeline simulation (see simulation.h).
#include "ch08_distributed/pp/simulation.h"

#include <algorithm>

#include "common/core/error.h"

namespace lab::ch08::pp {

namespace {

// The action that completes a transfer `a` of stage `stage`, and the stage that runs it.
struct Partner {
  int stage;
  PipeAction action;
};

Partner partner_of(int stage, const PipeAction& a) {
  switch (a.op) {
    case PipeOp::SendActivation: return {stage + 1, {PipeOp::RecvActivation, a.micro_batch}};
    case PipeOp::RecvActivation: return {stage - 1, {PipeOp::SendActivation, a.micro_batch}};
    case PipeOp::SendGradient: return {stage - 1, {PipeOp::RecvGradient, a.micro_batch}};
    case PipeOp::RecvGradient: return {stage + 1, {PipeOp::SendGradient, a.micro_batch}};
    default: fail(ErrorKind::Internal, "partner_of: ", action_name(a), " is not a transfer");
  }
}

}  // namespace

SimulatedPipeline simulate_pipeline(const std::vector<std::vector<PipeAction>>& schedules, double forward_seconds,
                                    double backward_seconds) {
  const int P = static_cast<int>(schedules.size());
  std::vector<size_t> next(P, 0);  // each stage's next action
  std::vector<double> clock(P, 0.0);
  SimulatedPipeline sim;
  sim.busy_seconds.assign(P, 0.0);
  auto done = [&](int s) { return next[s] == schedules[s].size(); };

  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < P; ++s) {
      // Run this stage as far as it goes on its own: computations, and transfers its partner is waiting at.
      while (!done(s)) {
        const PipeAction& a = schedules[s][next[s]];
        if (a.op == PipeOp::Forward || a.op == PipeOp::Backward) {
          const double cost = a.op == PipeOp::Forward ? forward_seconds : backward_seconds;
          clock[s] += cost;
          sim.busy_seconds[s] += cost;
          ++next[s];
          progress = true;
          continue;
        }
        const Partner p = partner_of(s, a);
        LAB_CHECK(0 <= p.stage && p.stage < P, Internal, "stage ", s, " of ", P, ": ", action_name(a),
                  " has no neighbour to meet");
        if (done(p.stage) || !(schedules[p.stage][next[p.stage]] == p.action)) break;
        clock[s] = clock[p.stage] = std::max(clock[s], clock[p.stage]);
        ++next[s];
        ++next[p.stage];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int s = 0; s < P; ++s)
    if (!done(s)) stuck += cat(stuck.empty() ? "" : ", ", "stage ", s, " at ", action_name(schedules[s][next[s]]));
  LAB_CHECK(stuck.empty(), Internal, "the pipeline schedule deadlocks: ", stuck);
  sim.span_seconds = *std::max_element(clock.begin(), clock.end());
  return sim;
}

double bubble_fraction(const std::vector<double>& busy_seconds, double span_seconds) {
  LAB_CHECK(!busy_seconds.empty() && span_seconds > 0, InvalidArgument, "bubble_fraction: no stages or no time");
  double idle = 0;
  for (double busy : busy_seconds) idle += (span_seconds - busy) / span_seconds;
  return idle / static_cast<double>(busy_seconds.size());
}

}  // namespace lab::ch08::pp
