#include "ch10_gpt2/train_log.h"

#include <cerrno>
#include <cstring>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab {

JsonLog::JsonLog(const std::string& path, bool append) : path_(path) {
  if (path.empty()) return;
  make_directories(parent_directory(path));
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  LAB_CHECK(file_, Io, "cannot open the JSON log '", path, "': ", std::strerror(errno));
}

JsonLog::~JsonLog() {
  if (file_) std::fclose(file_);
}

void JsonLog::write(const Json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  LAB_CHECK(std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0, Io,
            "cannot write the JSON log '", path_, "': ", std::strerror(errno));
}

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

}  // namespace lab
