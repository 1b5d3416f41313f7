// ShardWriter: buffers one shard of u16 ids, writes it with write_shard (atomic), cleans up old shards.
#include "ch05_data/tokenize/shard_writer.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/core/error.h"
#include "common/io/shards.h"

namespace lab::ch05 {

ShardWriter::ShardWriter(std::string prefix, std::string split, int64_t shard_tokens)
    : prefix_(std::move(prefix)), split_(std::move(split)), shard_tokens_(shard_tokens) {
  LAB_CHECK(shard_tokens_ >= 1, InvalidArgument, "shard size must be at least 1 token, got ", shard_tokens_);
  for (const std::string& path : existing_shard_paths())
    LAB_CHECK(looks_like_shard(path), Io, "'", path,
              "' exists and is not a token shard: shards replace only earlier shards (move the file away or "
              "choose another output prefix)");
}

std::string ShardWriter::shard_path(const std::string& prefix, const std::string& split, int64_t index) {
  char number[32];
  std::snprintf(number, sizeof(number), "%06lld", static_cast<long long>(index));
  return prefix + "_" + split + "_" + number + ".bin";
}

void ShardWriter::append(std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    LAB_ASSERT(id >= 0 && id <= 0xFFFF);
    buffer_.push_back(static_cast<uint16_t>(id));
    if (static_cast<int64_t>(buffer_.size()) == shard_tokens_) flush();
  }
  tokens_ += static_cast<int64_t>(ids.size());
}

void ShardWriter::flush() {
  const std::string path = shard_path(prefix_, split_, static_cast<int64_t>(shards_.size()));
  write_shard(path, buffer_);
  shards_.push_back(path);
  buffer_.clear();
}

void ShardWriter::finish() {
  if (!buffer_.empty()) flush();
  remove_stale_shards();
}

std::vector<std::string> ShardWriter::existing_shard_paths(int64_t first_index) const {
  namespace fs = std::filesystem;
  const fs::path prefix(prefix_);
  const fs::path dir = prefix.has_parent_path() ? prefix.parent_path() : fs::path(".");
  std::vector<std::string> paths;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return paths;  // nothing written there yet
  const std::string stem = prefix.filename().string() + "_" + split_ + "_";
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(stem) || !name.ends_with(".bin")) continue;
    const std::string digits = name.substr(stem.size(), name.size() - stem.size() - 4);
    const bool numbered =
        digits.size() >= 6 && digits.size() <= 18 && digits.find_first_not_of("0123456789") == std::string::npos;
    if (numbered && std::stoll(digits) >= first_index) paths.push_back(entry.path().string());
  }
  return paths;
}

void ShardWriter::remove_stale_shards() const {
  // Checked again here: a file may have appeared since the constructor looked.
  for (const std::string& path : existing_shard_paths(static_cast<int64_t>(shards_.size())))
    if (looks_like_shard(path)) std::filesystem::remove(path);
}

}  // namespace lab::ch05
