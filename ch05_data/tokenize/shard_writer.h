// Cuts one split's token stream (train or val) into shards of exactly `shard_tokens` tokens, the last one
// holding the rest, named <prefix>_<split>_000000.bin, <prefix>_<split>_000001.bin, ...
//
// Documents run across shard boundaries, as in llm.c: a loader reads the shards as one concatenated
// stream, so a boundary inside a document costs nothing. Each shard is written atomically when it is full,
// so the writer holds at most one shard's tokens (2 bytes each).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lab::ch05 {

class ShardWriter {
 public:
  // Refuses (Error(Io), before anything is written) when a file named like one of this split's shards exists
  // and is not a token shard: the writer replaces and removes earlier shards only, never a user's other file.
  ShardWriter(std::string prefix, std::string split, int64_t shard_tokens);

  static std::string shard_path(const std::string& prefix, const std::string& split, int64_t index);

  void append(std::span<const int32_t> ids);
  // Writes the last, partial shard (if any token is left) and removes shards <prefix>_<split>_N.bin that an
  // earlier run left beyond the ones just written, so a glob over the split matches exactly this run.
  void finish();

  int64_t tokens() const { return tokens_; }
  const std::vector<std::string>& shards() const { return shards_; }

 private:
  void flush();
  // Files named <prefix>_<split>_N.bin with N >= first_index (any kind of file: the caller decides).
  std::vector<std::string> existing_shard_paths(int64_t first_index = 0) const;
  void remove_stale_shards() const;

  std::string prefix_;
  std::string split_;
  int64_t shard_tokens_;
  std::vector<uint16_t> buffer_;
  std::vector<std::string> shards_;
  int64_t tokens_ = 0;
};

}  // namespace lab::ch05
