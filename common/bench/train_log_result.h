// A training log read as a bench result, so that bench_diff compares two training runs and
// scripts/plot_bench.py (which reads the same logs itself) draws their curves.
//
// The log is the JSON-lines file gpt2_train writes with --log-json (ch10_gpt2/train_log.h): a header
// {"log": "gpt2_train", "date", "command", "machine"}, then one record per step, evaluation and sample. As a
// result it becomes
//   metrics  step_ms, data_ms (ms, lower is better) and tokens_per_s (higher), summarised over every step, so
//            a change in step time is judged against the spread of the steps;
//   rows     the loss curve: {"step", "loss", "val_loss"} at every step with an evaluation and at the last
//            step (without evaluations: at every tenth of the run), paired by step between two logs.
// A resumed run appends its records to the same log: the first header describes the run, and a step logged
// twice (a run resumed from an earlier checkpoint) counts with its last record.
#pragma once

#include <string>

#include "common/bench/result.h"

namespace lab::bench {

// Error(Io) when the file cannot be read, Error(Format) naming the file and line when it is not such a log.
BenchResult result_from_train_log(const std::string& path);

// A bench result file or a training log, told apart by their contents.
BenchResult read_result_or_train_log(const std::string& path);

}  // namespace lab::bench
