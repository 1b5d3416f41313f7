// Where a loader's tokens come from: an interface for copying a run of tokens out of a shard, and the
// plainest implementation, positioned read() calls on shard files that stay open.
//
// Keeping the files open matters for small batches: opening a shard, re-reading and re-checking its
// header and closing it again costs several system calls per batch, more than the read itself when a
// batch is a few kilobytes (chapter 5's README has the measurement).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/data/batch_plan.h"
#include "common/io/files.h"

namespace lab {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Copies the tokens of `piece` to `dst`. Safe to call from several threads at once.
  virtual void read(const ShardPiece& piece, uint16_t* dst) const = 0;
};

// The shards of a plan, each opened once. The headers were validated by the BatchPlan; opening checks
// that each file still has the size its header promised (Error(Format) naming the file). A file that
// shrinks later makes read() throw Error(Io) naming it.
class ShardFiles final : public TokenSource {
 public:
  explicit ShardFiles(const std::vector<ShardInfo>& shards);
  void read(const ShardPiece& piece, uint16_t* dst) const override;

 private:
  std::vector<std::unique_ptr<InputFile>> files_;
};

// Checks that the shard file of `info` still has the size its header promised (Error(Format) naming it).
void check_shard_size(const ShardInfo& info, int64_t bytes);

// The B*T+1 tokens of the plan's batch k, read piece by piece from `source` into `dst`.
void gather_batch(const BatchPlan& plan, int64_t k, const TokenSource& source, uint16_t* dst);

}  // namespace lab
