// The data-loader interface, and the simplest loader: a synchronous read() of each batch.
//
// All loaders (chapter 5 adds memory-mapped, prefetching and pinned/async versions, see
// ch05_data/loaders/make_loader.h) follow one BatchPlan, so they hand out the same batches in the same
// order and resume from the same single integer. The interface does the bookkeeping every stage shares
// (the position, validation of seek, the report of each new epoch); a stage supplies fetch(), and
// restart() when it reads ahead.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/data/batch_plan.h"
#include "common/data/token_source.h"

namespace lab {

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;
  virtual std::string name() const = 0;

  // Fills `inputs` and `targets` (i32 [B, T], on device()) with the next batch and advances position().
  // Handing out the first batch of an epoch after the first reports "epoch E begins" through
  // LoaderOptions::log, once. On an error (a bad shard, a failed reader thread) the position stays.
  void next(Tensor& inputs, Tensor& targets);
  // Batches handed out so far: the state a checkpoint saves.
  int64_t position() const { return position_; }
  // Continue as if `position` batches had been handed out; anything read ahead is discarded.
  void seek(int64_t position);
  virtual Device device() const { return Device::cpu(); }
  const BatchPlan& plan() const { return plan_; }

 protected:
  // Reads every shard's header: a bad shard is an error here, naming the file.
  BatchLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options);
  // Produces batch k (always position()).
  virtual void fetch(int64_t k, Tensor& inputs, Tensor& targets) = 0;
  // Drops whatever was read ahead; the next fetch() asks for batch k.
  virtual void restart(int64_t /*k*/) {}

 private:
  BatchPlan plan_;
  int64_t position_ = 0;
};

// Stage 1: every batch is read with positioned read() calls on the shard files (open for the loader's
// lifetime), on the caller's thread, which also pays any simulated slow source.
class SyncLoader final : public BatchLoader {
 public:
  SyncLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options);
  std::string name() const override { return "sync"; }

 private:
  void fetch(int64_t k, Tensor& inputs, Tensor& targets) override;

  ShardFiles files_;
  std::vector<uint16_t> buffer_;
};

// Allocates i32 [B, T] tensors for a loader's output on `device` if they are not already that.
void ensure_batch_tensors(Tensor& inputs, Tensor& targets, int64_t batch, int64_t seq, Device device);

// What a stage that reads on the caller's thread does per batch: gathers batch k from `source` into
// `buffer` (B*T+1 tokens), pays the simulated slow source, and widens it into CPU `inputs` and `targets`.
void read_batch_here(const BatchPlan& plan, int64_t k, const TokenSource& source, std::vector<uint16_t>& buffer,
                     Tensor& inputs, Tensor& targets);

}  // namespace lab
