// The pipeline's training step (see pipeline_step.h).
#include "ch08_distributed/pp/pipeline_step.h"

#include <string>
#include <vector>

#include "ch08_distributed/pp/simulation.h"
#include "ch08_distributed/tp/gradient_norm.h"
#include "common/core/error.h"

namespace lab::ch08::pp {

PipelineStep::PipelineStep(const comm::ParallelContext& context, PpSchedule schedule,
                           std::unique_ptr<dist::GradientReducer> dp_reducer, GPT2& model, AdamW& optimizer,
                           TrainStepConfig config)
    : TrainStep(model, optimizer, config),
      context_(context),
      link_(context.pp()),
      stage_(model, link_, schedule),
      tied_embedding_(context),
      dp_reducer_(std::move(dp_reducer)) {
  const ModelShard& shard = model.shard();
  LAB_CHECK(shard.has_embedding == context.is_first_stage() && shard.has_head == context.is_last_stage(),
            InvalidArgument, "PipelineStep: the model (", shard.str(model.config()), ") is not the shard of stage ",
            context.coords().pp, " of ", context.layout().pp);
}

void PipelineStep::run_micro_batches(const BatchSource& next_batch, TrainStepResult& result) {
  const int M = static_cast<int>(config().accum_steps);
  comm::Communicator& pp = context_.pp();
  if (!stage_.captured()) pp.barrier();  // the stages start the schedule together, so that their spans compare
  const StageStepStats s = stage_.run(next_batch, M, loss_gradient_scale(), loss_sum(), [this] {
    if (dp_reducer_) dp_reducer_->before_last_backward();
  });
  result.data_seconds += s.data_seconds;
  if (config().time_phases) {  // forward and backward interleave: their time together, less the data's
    lap(result.forward_seconds);
    result.forward_seconds -= s.data_seconds;
  }
  stats_.peak_live = s.peak_live;

  // The loss, summed on the last stage (the others' sums are 0), goes to every stage and is averaged over the dp
  // group, on the device.
  if (pp.size() > 1) pp.all_reduce(loss_sum(), comm::ReduceOp::Sum);
  if (context_.dp().size() > 1) context_.dp().all_reduce(loss_sum(), comm::ReduceOp::Avg);
}

std::vector<comm::Communicator*> PipelineStep::groups() const {
  std::vector<comm::Communicator*> groups{&context_.pp(), &context_.dp(), &context_.tp()};
  if (comm::Communicator* tied = tied_embedding_.group()) groups.push_back(tied);
  return groups;
}

std::string PipelineStep::capture_blocker() const {
  if (std::string why = TrainStep::capture_blocker(); !why.empty()) return why;
  for (const comm::Communicator* group : groups())
    if (std::string why = group->capture_blocker("the pipeline's transfers"); !why.empty()) return why;
  return "";
}

void PipelineStep::prepare_capture() {
  for (comm::Communicator* group : groups()) group->queue_where_able();
  if (dp_reducer_) dp_reducer_->queue_on_device();
  stage_.set_captured(true);
}

void PipelineStep::before_read_back() {
  if (dp_reducer_) dp_reducer_->wait_queued();
  for (comm::Communicator* group : groups()) group->wait_queued();
}

void PipelineStep::after_report() {
  comm::Communicator& pp = context_.pp();
  stats_.ideal_bubble = ideal_bubble_fraction(pp.size(), static_cast<int>(config().accum_steps));
  stats_.bubble_measured = !stage_.captured();
  if (!stats_.bubble_measured) return;
  // The bubble, from the stages' device times, read now that the step is done: the busy times summed over the
  // stages and the spans' maximum, one all-reduce each.
  const StageTimes times = stage_.last_times();
  const Device device = model().device();
  const Tensor busy = Tensor::from_floats(std::vector<float>{static_cast<float>(times.busy_seconds)}, {1}, device);
  const Tensor span = Tensor::from_floats(std::vector<float>{static_cast<float>(times.span_seconds)}, {1}, device);
  if (pp.size() > 1) {
    pp.all_reduce(busy, comm::ReduceOp::Sum);
    pp.all_reduce(span, comm::ReduceOp::Max);
  }
  stats_.busy_seconds = times.busy_seconds;
  stats_.span_seconds = span.item();
  const double mean_busy = busy.item() / static_cast<double>(pp.size());
  stats_.bubble = stats_.span_seconds > 0 ? bubble_fraction({mean_busy}, stats_.span_seconds) : 0.0;
}

void PipelineStep::reduce_gradients() {
  if (dp_reducer_) dp_reducer_->finish();
  tied_embedding_.all_reduce_gradient(model());
}

void PipelineStep::compute_gradient_norm() {
  write_gradient_norm(tp::model_parallel_sum_squares(model(), context_));
}

}  // namespace lab::ch08::pp
