// Token shards, the llm.c-compatible format:
//   a 1024-byte header of 256 little-endian int32: [0] = 20240520 (magic), [1] = 1 (version),
//   [2] = number of tokens; then that many little-endian uint16 token ids.
// Everything is validated on read; a bad or truncated shard is Error(Format) naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lab {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderInts = 256;
inline constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;

struct ShardInfo {
  std::string path;
  int64_t num_tokens = 0;
};

// Reads and validates the header (magic, version, token count against the file size).
ShardInfo read_shard_info(const std::string& path);
// True when `path` is a regular file that starts like a token shard (magic and version). Cheap: reads 8 bytes.
// Tools use it before replacing or removing a file, so they only ever touch shards.
bool looks_like_shard(const std::string& path);
// The whole shard's tokens.
std::vector<uint16_t> read_shard(const std::string& path);
// `count` tokens starting at token `offset` (a positioned read; validates the range).
void read_shard_tokens(const std::string& path, int64_t offset, int64_t count, uint16_t* out);
// Writes a shard atomically (temp file + fsync + rename).
void write_shard(const std::string& path, std::span<const uint16_t> tokens);

// Expands a file name or a glob pattern ("dir/tiny_train_*.bin") into the sorted list of matching files.
// Throws Error(Io) when nothing matches.
std::vector<std::string> expand_shard_pattern(const std::string& pattern);

}  // namespace lab
