// The data-parallel training step (see data_parallel_step.h).
#include "common/dist/data_parallel_step.h"

#include "common/core/error.h"

namespace lab::dist {

DataParallelStep::DataParallelStep(comm::Communicator& group, DpStage stage, int64_t bucket_bytes, GPT2& model,
                                   AdamW& optimizer, TrainStepConfig config)
    : TrainStep(model, optimizer, config),
      group_(group),
      reducer_(make_gradient_reducer(stage, group, model.parameters(), bucket_bytes)) {}

void DataParallelStep::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  micro_batch_ = 0;
  TrainStep::run_micro_batches(next_batch, result);
  group_.all_reduce(loss_sum(), comm::ReduceOp::Avg);  // the global batch's loss, on the device
}

void DataParallelStep::forward_backward(const MicroBatch& batch, TrainStepResult& result) {
  if (++micro_batch_ == config().accum_steps) reducer_->before_last_backward();
  TrainStep::forward_backward(batch, result);
}

void DataParallelStep::reduce_gradients() {
  reducer_->finish();
}

std::string DataParallelStep::capture_blocker() const {
  if (std::string why = TrainStep::capture_blocker(); !why.empty()) return why;
  return group_.capture_blocker("data parallelism's all-reduces");
}

void DataParallelStep::prepare_capture() {
  group_.queue_where_able();
  reducer_->queue_on_device();
}

void DataParallelStep::before_read_back() {
  reducer_->wait_queued();
  group_.wait_queued();
}

}  // namespace lab::dist
