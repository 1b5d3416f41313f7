#include "ch10_gpt2/train_log.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/core/error.h"
#include "common/io/files.h"

namespace lab {

namespace {

// True when the file's first line is a record of this trainer's log: an object with "log" or "step".
bool starts_like_a_log(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return true;  // empty
  try {
    const Json first = Json::parse(line);
    return first.is_object() && (first.contains("log") || first.contains("step"));
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

JsonLog::JsonLog(std::string path, bool append) : path_(std::move(path)), append_(append) {
  if (path_.empty()) return;
  check_file_writable(path_);
  LAB_CHECK(!file_exists(path_) || starts_like_a_log(path_), Io, "refusing to ", append_ ? "append to" : "overwrite",
            " '", path_, "': it is not a gpt2_train JSON log; give a new path");
}

JsonLog::~JsonLog() {
  if (file_) std::fclose(file_);
}

void JsonLog::write(const Json& record) {
  if (path_.empty()) return;
  if (!file_) {
    file_ = std::fopen(path_.c_str(), append_ ? "a" : "w");
    LAB_CHECK(file_, Io, "cannot open the JSON log '", path_, "': ", std::strerror(errno));
  }
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
