// Shards mapped read-only into the address space: a TokenSource whose reads are plain memory copies.
//
// After mmap() the page cache *is* the shard: reading a token touches the cached page directly, with no
// system call and no copy into a user buffer. A page that is not cached yet is read from disk on first
// touch (a page fault, with the kernel's read-ahead around it).
//
// The hazard of a mapping is a file that shrinks while mapped: touching a page past its new end raises
// SIGBUS, which kills the process instead of raising an error. So every read first asks the file for its
// size (one fstat(), far cheaper than the copy) and turns a shrunk shard into Error(Io) naming the file.
// That narrows the window to the instant between the check and the copy; it does not close it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/data/token_source.h"

namespace lab::ch05 {

class MappedShard {
 public:
  // Maps the shard; Error(Io) when it cannot be opened or mapped, Error(Format) when its size no longer
  // matches its header. Both name the file.
  explicit MappedShard(const ShardInfo& info);
  ~MappedShard();
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t num_tokens() const { return num_tokens_; }
  // Copies `count` tokens starting at token `offset`.
  void read(int64_t offset, int64_t count, uint16_t* dst) const;

 private:
  std::string path_;
  int64_t num_tokens_ = 0;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

class MappedShards final : public TokenSource {
 public:
  explicit MappedShards(const std::vector<ShardInfo>& shards);
  void read(const ShardPiece& piece, uint16_t* dst) const override;

 private:
  std::vector<std::unique_ptr<MappedShard>> shards_;
};

}  // namespace lab::ch05
