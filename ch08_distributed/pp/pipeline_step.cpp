// The pipeline's training step (see pipeline_step.h).
#include "ch08_distributed/pp/pipeline_step.h"

#include "ch08_distributed/pp/simulation.h"
#include "ch08_distributed/tp/gradient_norm.h"

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
  const Device device = model().device();
  pp.barrier();  // the stages start the schedule together, so that their spans compare
  const StageStepStats s = stage_.run(next_batch, M, loss_gradient_scale(), [this] {
    if (dp_reducer_) dp_reducer_->before_last_backward();
  });
  result.data_seconds += s.data_seconds;
  result.forward_seconds += config().time_phases ? s.span_seconds - s.data_seconds : 0.0;

  // One message per step carries the loss to every stage and the busy times and spans for the bubble:
  // [loss, busy, span] summed over the stages, then the span's maximum.
  const std::vector<float> host_sums{static_cast<float>(pp.rank() == pp.size() - 1 ? s.loss_sum / M : 0.0),
                                     static_cast<float>(s.busy_seconds)};
  const std::vector<float> host_span{static_cast<float>(s.span_seconds)};
  const Tensor sums = Tensor::from_floats(host_sums, {2}, device);
  const Tensor span = Tensor::from_floats(host_span, {1}, device);
  if (pp.size() > 1) {
    pp.all_reduce(sums, comm::ReduceOp::Sum);
    pp.all_reduce(span, comm::ReduceOp::Max);
  }
  const std::vector<float> totals = sums.to_floats();
  double loss = totals[0];
  if (context_.dp().size() > 1) {
    const Tensor t = Tensor::from_floats(std::vector<float>{totals[0]}, {1}, device);
    context_.dp().all_reduce(t, comm::ReduceOp::Avg);
    loss = t.item();
  }
  write_loss(loss);

  stats_.busy_seconds = s.busy_seconds;
  stats_.span_seconds = span.item();
  stats_.peak_live = s.peak_live;
  stats_.ideal_bubble = ideal_bubble_fraction(pp.size(), M);
  const double mean_busy = totals[1] / static_cast<double>(pp.size());
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
