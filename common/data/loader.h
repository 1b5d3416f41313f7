// The data-loader interface, and the simplest loader: a synchronous read() of each batch.
//
// All loaders (chapter 5 adds memory-mapped, prefetching and pinned/async versions) follow one BatchPlan,
// so they hand out the same batches in the same order and resume from the same single integer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/data/batch_plan.h"

namespace lab {

class BatchLoader {
 public:
  virtual ~BatchLoader() = default;
  virtual std::string name() const = 0;

  // Fills `inputs` and `targets` (i32 [B, T], on device()) with the next batch and advances position().
  virtual void next(Tensor& inputs, Tensor& targets) = 0;
  // Batches handed out so far: the state a checkpoint saves.
  virtual int64_t position() const = 0;
  // Continue as if `position` batches had been handed out.
  virtual void seek(int64_t position) = 0;
  virtual Device device() const { return Device::cpu(); }
  virtual const BatchPlan& plan() const = 0;
};

// Stage 1: every batch is read with positioned read() calls on the shard files, on the caller's thread.
class SyncLoader final : public BatchLoader {
 public:
  SyncLoader(const std::vector<std::string>& shard_paths, const LoaderOptions& options);
  std::string name() const override { return "sync"; }
  void next(Tensor& inputs, Tensor& targets) override;
  int64_t position() const override { return position_; }
  void seek(int64_t position) override;
  const BatchPlan& plan() const override { return plan_; }

 private:
  BatchPlan plan_;
  int64_t position_ = 0;
  std::vector<uint16_t> buffer_;
};

// Allocates i32 [B, T] tensors for a loader's output on `device` if they are not already that.
void ensure_batch_tensors(Tensor& inputs, Tensor& targets, int64_t batch, int64_t seq, Device device);

}  // namespace lab
