// The choice of training step by layout (see make_train_step.h).
#include "ch08_distributed/make_train_step.h"

#include "ch08_distributed/pp/pipeline_step.h"
#include "ch08_distributed/tp/tensor_parallel_step.h"
#include "common/dist/data_parallel_step.h"

namespace lab::ch08 {

std::unique_ptr<TrainStep> make_train_step(const comm::ParallelContext& context, const ParallelOptions& options,
                                           GPT2& model, AdamW& optimizer, TrainStepConfig config) {
  const comm::ParallelLayout& layout = context.layout();
  if (layout.pp > 1) {
    LAB_CHECK(config.accum_steps == options.micro_batches, InvalidArgument, "--micro-batches ", options.micro_batches,
              ": a pipeline step runs the step's ", config.accum_steps, " micro-batches");
    std::unique_ptr<dist::GradientReducer> reducer;
    if (layout.dp > 1)
      reducer = dist::make_gradient_reducer(options.dp_stage, context.dp(), model.parameters(), options.bucket_bytes);
    return std::make_unique<pp::PipelineStep>(context, options.pp_schedule, std::move(reducer), model, optimizer,
                                              config);
  }
  if (layout.tp > 1)
    return std::make_unique<tp::TensorParallelStep>(context, options.dp_stage, options.bucket_bytes, model, optimizer,
                                                    config);
  if (layout.dp == 1) return std::make_unique<TrainStep>(model, optimizer, config);
  return std::make_unique<dist::DataParallelStep>(context.dp(), options.dp_stage, options.bucket_bytes, model,
                                                  optimizer, config);
}

}  // namespace lab::ch08
