// Stage 2: memory-mapped shards, read on the caller's thread.
//
// What changes from stage 1 (SyncLoader, common/data/loader.h): each shard is mapped once, and a batch
// is copied straight out of the page cache, with no read() system call per batch. On a warm cache that
// saves only the call itself, small beside the copy; on a cold cache the kernel's read-ahead around each
// page fault plays the part of read()'s, less efficiently (chapter 5's README has both measured). The
// caller's thread still does everything (and pays any simulated slow source), so the training step still
// waits for every batch.
//
// When not to use it: on storage where a shard may shrink while mapped (see mapped_shards.h), on 32-bit
// hosts with large splits (address space), and whenever latency rather than system-call overhead is the
// bottleneck: mapping does not hide a slow disk or a remote file system, a background reader does
// (stage 3).
#pragma once

#include "ch05_data/loaders/mapped_shards.h"
#include "common/data/loader.h"

namespace lab::ch05 {

class MmapLoader final : public BatchLoader {
 public:
  MmapLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options);
  std::string name() const override { return "mmap"; }

 private:
  void fetch(int64_t k, Tensor& inputs, Tensor& targets) override;

  MappedShards shards_;
  std::vector<uint16_t> buffer_;
};

}  // namespace lab::ch05
