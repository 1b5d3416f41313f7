// The training step of tensor parallelism (with or without data parallelism): DataParallelStep, whose model
// is this rank's tp shard (model_for_rank), with the gradient norm of the split model.
//
// Forward and backward need nothing from the step: the model's layers communicate inside the tp group by
// themselves (f and g, the vocabulary-parallel embedding and cross-entropy). Each rank's gradients are its
// shard's, and with data parallelism they are averaged over the dp group (the ranks holding the same shard)
// exactly as whole gradients are. What changes is the norm that clipping uses: the sum of squares over the tp
// group, the parameters every tp rank holds counted once (gradient_norm.h).
#pragma once

#include "common/comm/parallel_context.h"
#include "common/dist/data_parallel_step.h"

namespace lab::ch08::tp {

class TensorParallelStep : public dist::DataParallelStep {
 public:
  // As DataParallelStep over context.dp(); the context must outlive the step.
  TensorParallelStep(const comm::ParallelContext& context, dist::DpStage stage, int64_t bucket_bytes, GPT2& model,
                     AdamW& optimizer, TrainStepConfig config)
      : dist::DataParallelStep(context.dp(), stage, bucket_bytes, model, optimizer, config), context_(context) {}

  // Captured in a CUDA graph where the tensor-parallel group's collectives can be queued on the stream (NCCL):
  // the activations' and their gradients' all-reduces and the norm's sum go into the graph with the kernels, as
  // the data-parallel group's do.
  std::string capture_blocker() const override;
  void prepare_capture() override;

 protected:
  void compute_gradient_norm() override;
  void before_read_back() override;

 private:
  const comm::ParallelContext& context_;
};

}  // namespace lab::ch08::tp
