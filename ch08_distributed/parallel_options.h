// The settings of a distributed training run, as gpt2_train's flags give them:
//
//   --dp D --tp T --pp P      the layout; D * T * P must be the number of ranks (mpirun -np)
//   --dp-stage naive|bucketed|overlap
//                             how data-parallel ranks average their gradients (common/dist/dp_stage.h)
//   --bucket-mb MB            the bucket size of the bucketed and overlapped stages (PyTorch DDP's 25)
//   --micro-batches M         micro-batches per pipeline per step (pipeline parallelism)
//   --pp-schedule gpipe|1f1b  the pipeline schedule
//
// The default stage is overlap, as in PyTorch DDP: on a GPU it hides the all-reduce behind backward, and its
// result is the same as the other two stages' (every stage is tested against one process). Choose bucketed
// where no second core or stream is free to communicate while backward computes (see the chapter README).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm/parallel_context.h"
#include "common/dist/dp_stage.h"

namespace lab::ch08 {

enum class PpSchedule { GPipe, OneFOneB };

struct ParallelOptions {
  comm::ParallelLayout layout;
  dist::DpStage dp_stage = dist::DpStage::Overlap;
  int64_t bucket_bytes = int64_t{25} << 20;
  int64_t micro_batches = 1;
  PpSchedule pp_schedule = PpSchedule::OneFOneB;
};

// "gpipe", "1f1b"; parse_pp_schedule throws InvalidArgument naming --pp-schedule for anything else.
const char* pp_schedule_name(PpSchedule schedule);
PpSchedule parse_pp_schedule(const std::string& name);
std::vector<std::string> pp_schedule_names();

// The layout of a job of `ranks` processes from the flags: tp and pp as given, dp as given or, when 0, the
// ranks left over (ranks / (tp * pp)). InvalidArgument, naming the flags and mpirun's -np, when the product is
// not `ranks`.
comm::ParallelLayout resolve_layout(int64_t dp, int64_t tp, int64_t pp, int ranks);

}  // namespace lab::ch08
