// The training half of ch08_dist_bench: every parallel layout the world size allows, as the rungs of a
// staircase (common/lab/staircase.h), each timed over a few training steps of the same GPT-2 on the same
// global batch, with what it communicated and how that compares with theory.
//
// The rungs, for N ranks (each differs from the one before by one setting, so each ratio measures one change):
//   dpN naive -> dpN bucketed -> dpN overlap     data parallelism's three stages
//   tpN, ppN (schedule kept) -> ppN (the other)  tensor and pipeline parallelism, both schedules
//   dpA x tpB, dpA x ppB, tpA x ppB, ...         the combinations whose shards fit the model
// One rank has one rung, "1 rank": the baseline of scaling efficiency (--baseline reads its JSON). Each rung's
// model, optimizer and step come from the trainer's builder (build_run, ch10_gpt2/run_config.h), as
// gpt2_train --dp D --tp T --pp P would build them.
//
// The workload is fixed across rungs: a step runs `micro_batches` micro-batches of `batch` rows of `seq` tokens
// (the global micro-batch, split over the data-parallel ranks), so every rung trains the same tokens per step
// and step times compare directly; one rank accumulating the same micro-batches is the baseline.
//
// Per rung (rank 0's view; bytes are per step):
//   step_ms              slowest rank's step time, median of the timed steps
//   <collective>_bytes   payload the Communicator's traffic counters saw on rank 0's groups (nccl-tests'
//                        payload: the all-reduced tensor, the tensor sent or received), including the
//                        overlapped stage's second communicator
//   link_bytes           sum of payload x bus factor (2(n-1)/n for all-reduce, 1 for send/recv): what rank 0's
//                        link carried with ring algorithms; theory_link_bytes the same from the formulas:
//                          dp  2(D-1)/D x parameters x 4 bytes            (the gradients)
//                          tp  4 all-reduces of b T C per block and micro-batch (2 forward, 2 backward),
//                              x 4 bytes x 2(T-1)/T                       (b = batch / D rows)
//                          pp  one activation forward and one gradient back of b T C per micro-batch
//                        The measured side also holds what theory leaves out (the loss average, the norm,
//                        tp's embedding and cross-entropy all-reduces), so link_vs_theory is >= 1. Not counted:
//                        pp's all-reduce of the tied embedding's gradient between the first and last stage,
//                        on a group of its own inside the pipeline step.
//   grad_bytes, grad_ms  the data-parallel gradient all-reduces alone (the reducer's counts and wall time),
//   algbw, busbw         and their bandwidth: grad_bytes / grad_ms, x 2(D-1)/D
//   overlap_fraction     the part of grad_ms hidden behind backward (1 - exposed / total), dp rungs
//   bubble, bubble_theory  pp rungs: measured idle fraction of the stages, and (P-1)/(M+P-1)
//   peak_live            pp rungs: the most micro-batches whose activations the first stage held at once
//                        (GPipe M, 1F1B at most P: the schedules' memory, which their bubbles do not show)
//   scaling_efficiency   t(1 rank) / (N x t(N ranks)), with the same global batch, from --baseline
#pragma once

#include <cstdint>
#include <string>

#include "common/bench/result.h"
#include "common/comm/communicator.h"
#include "common/lab/staircase.h"
#include "common/util/flags.h"

namespace lab::ch08 {

struct TrainingBenchSettings {
  std::string model = "tiny";
  int64_t batch = 4;  // rows of the global micro-batch, split over the data-parallel ranks
  int64_t seq = 64;
  int64_t micro_batches = 2;
  int64_t steps = 3;   // timed
  int64_t warmup = 1;  // untimed steps per rung (ch08_dist_bench's --warmup)
  int64_t bucket_mb = 25;
  std::string baseline;  // a one-rank run's JSON, for scaling efficiency

  void register_flags(Flags& flags);  // all but --warmup, which the collectives share
};

// Runs every rung on `world` (collective: every rank must call it with the same settings) and adds the
// staircase's rows and metrics, with the columns above, to `result`. InvalidArgument when the batch does not
// split over a layout's data-parallel ranks, or when --baseline is not a one-rank run of the same workload.
staircase::StaircaseReport run_training_staircase(comm::Communicator& world, const TrainingBenchSettings& settings,
                                                  bench::BenchResult& result);

}  // namespace lab::ch08
