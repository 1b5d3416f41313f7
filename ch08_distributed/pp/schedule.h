// Pipeline schedules as data: what one stage does in one training step, in order, transfers included.
//
// A step runs M micro-batches through P stages. Each stage's list holds, per micro-batch m, its forward and
// backward and the transfers around them:
//   RecvActivation m   the boundary activation from the previous stage      (every stage but the first)
//   Forward m          this stage's blocks on it (the first stage embeds; the last computes the loss)
//   SendActivation m   its output to the next stage                         (every stage but the last)
//   RecvGradient m     the gradient of that output, from the next stage     (every stage but the last)
//   Backward m         backward through this stage's blocks
//   SendGradient m     the gradient of its input, to the previous stage     (every stage but the first)
// The executor (stage.h) runs the list with blocking transfers; a transfer completes when both stages reach
// it, so the lists of two neighbours must meet in the same order (simulation.h checks every schedule for it).
//
//   GPipe (Huang et al., 2019): all M forwards, then all M backwards. Simple; every stage holds the
//     activations of all M micro-batches at the turn.
//   1F1B (PipeDream-Flush, Narayanan et al., 2021; Megatron-LM's default): stage s runs P - s - 1 warm-up
//     forwards, then alternates one forward and one backward, then drains the remaining backwards. The same
//     bubble as GPipe, (P-1)/(M+P-1) of the step, but stage s holds at most P - s micro-batches'
//     activations, whatever M: memory bounded by the number of stages, not of micro-batches.
//
// In 1F1B's steady state two neighbours exchange an activation and a gradient at once (Megatron posts both
// as one batched operation). With blocking transfers the order within each exchange decides whether the
// stages meet: the earlier stage sends first and then receives, the later stage receives first and then
// sends, so each exchange's two halves pair up.
#pragma once

#include <string>
#include <vector>

#include "ch08_distributed/parallel_options.h"

namespace lab::ch08::pp {

enum class PipeOp { RecvActivation, Forward, SendActivation, RecvGradient, Backward, SendGradient };

struct PipeAction {
  PipeOp op;
  int micro_batch;
  bool operator==(const PipeAction&) const = default;
};

// "F3", "B0", "ra2" (receive activation), "sa2", "rg1", "sg1".
std::string action_name(const PipeAction& action);
// The names joined by spaces, for messages and tests: "F0 sa0 F1 sa1 rg0 B0 ...".
std::string schedule_str(const std::vector<PipeAction>& actions);

// Stage `stage` (0-based) of `stages` with `micro_batches` per step; InvalidArgument for sizes out of range.
std::vector<PipeAction> pipeline_schedule(PpSchedule schedule, int stage, int stages, int micro_batches);

// The most micro-batches whose forward has run and whose backward has not, at any point of `actions`: the
// micro-batches whose activations the stage holds at its peak.
int peak_live_micro_batches(const std::vector<PipeAction>& actions);

// The ideal pipeline's idle fraction, (P-1)/(M+P-1): with equal stages and free transfers, each stage idles
// for P-1 forward and P-1 backward slots of the M+P-1 each takes from the first stage's start to its end.
double ideal_bubble_fraction(int stages, int micro_batches);

}  // namespace lab::ch08::pp
