// What the trainer prints and records: a progress line per step, and a JSON-lines log.
//
// The JSON log has one object per line: every optimizer step ({"step", "loss", "lr", "grad_norm", "ms",
// "tokens_per_s", "mfu", "mem_peak_bytes", ...}), every evaluation ({"step", "val_loss", ...}) and every
// sample ({"step", "sample"}). Lines are flushed as they are written, so a crashed run keeps its log.
#pragma once

#include <cstdio>
#include <string>

#include "common/util/json.h"

namespace lab {

class JsonLog {
 public:
  // Empty path: a log that records nothing. `append` continues an existing file (resumed runs).
  JsonLog(const std::string& path, bool append);
  ~JsonLog();
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;
  void write(const Json& record);

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// "45s", "3m07s", "1h02m".
std::string format_duration(double seconds);

}  // namespace lab
