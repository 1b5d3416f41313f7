// What the trainer prints and records: a progress line per step, and a JSON-lines log.
//
// The JSON log has one object per line. The first line of a run is its header, {"log": "gpt2_train", "date",
// "command", "machine"} (a resumed run appends a header of its own); then every optimizer step ({"step",
// "loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "mem_peak_bytes", ...}), every evaluation ({"step",
// "val_loss", ...}) and every sample ({"step", "sample"}). Lines are flushed as they are written, so a crashed
// run keeps its log. bench_diff and scripts/plot_bench.py read these logs (common/bench/train_log_result.h).
#pragma once

#include <cstdio>
#include <string>

#include "common/util/json.h"

namespace lab {

class JsonLog {
 public:
  // Empty path: a log that records nothing. Checks now, before any work, that the file can be written and that
  // it is absent, empty or an earlier log of this trainer (Error(Io) otherwise: a user's file is never
  // overwritten). The file is created, or continued when `append` (resumed runs), at the first record.
  JsonLog(std::string path, bool append);
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;
  void write(const Json& record);

 private:
  std::string path_;
  bool append_;
  std::FILE* file_ = nullptr;
};

// "45s", "3m07s", "1h02m".
std::string format_duration(double seconds);

}  // namespace lab
