#include "ch05_data/loaders/mapped_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/core/error.h"

namespace lab::ch05 {

namespace {

[[noreturn]] void fail_errno(const char* what, const std::string& path) {
  fail(ErrorKind::Io, "cannot ", what, " shard '", path, "': ", std::strerror(errno));
}

}  // namespace

MappedShard::MappedShard(const ShardInfo& info) : path_(info.path), num_tokens_(info.num_tokens) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_errno("open", path_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int saved = errno;
    ::close(fd_);
    errno = saved;
    fail_errno("stat", path_);
  }
  try {
    check_shard_size(info, st.st_size);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  bytes_ = static_cast<size_t>(st.st_size);
  base_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    const int saved = errno;
    ::close(fd_);
    errno = saved;
    fail_errno("map", path_);
  }
}

MappedShard::~MappedShard() {
  ::munmap(base_, bytes_);
  ::close(fd_);
}

void MappedShard::read(int64_t offset, int64_t count, uint16_t* dst) const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail_errno("stat", path_);
  const int64_t end = kShardHeaderBytes + 2 * (offset + count);
  LAB_CHECK(st.st_size >= end, Io, "shard '", path_, "' shrank to ", st.st_size, " bytes while mapped (it was ", bytes_,
            "); reading tokens up to byte ", end, " would fault");
  std::memcpy(dst, static_cast<const char*>(base_) + kShardHeaderBytes + 2 * offset,
              static_cast<size_t>(count) * sizeof(uint16_t));
}

MappedShards::MappedShards(const std::vector<ShardInfo>& shards) {
  for (const ShardInfo& info : shards) shards_.push_back(std::make_unique<MappedShard>(info));
}

void MappedShards::read(const ShardPiece& piece, uint16_t* dst) const {
  shards_[static_cast<size_t>(piece.shard)]->read(piece.offset, piece.count, dst);
}

}  // namespace lab::ch05
