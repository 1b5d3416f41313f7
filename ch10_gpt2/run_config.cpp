// The refusals of a run's configuration and its one builder (see run_config.h).
#include "ch10_gpt2/run_config.h"

#include "ch07_memory/optimizer_in_backward.h"
#include "ch08_distributed/tp/tensor_parallel.h"
#include "common/comm/single_process.h"

namespace lab {

std::optional<RunRefusal> run_refusal(const RunConfig& c) {
  const auto refuse = [](ErrorKind kind, std::string line) {
    return std::optional<RunRefusal>({kind, std::move(line)});
  };
  const comm::ParallelLayout& layout = c.parallel.layout;
  const bool fp16 = c.math == MathMode::FP16, sixteen_bit = matmul_dtype(c.math) != DType::F32;
  if (c.math == MathMode::TF32 && !c.device.is_cuda())
    return refuse(ErrorKind::Unsupported,
                  "--dtype tf32 needs a GPU (TF32 is a GPU tensor-core mode; the CPU computes in fp32)");
  if (c.cuda_graphs && !c.device.is_cuda())
    return refuse(ErrorKind::InvalidArgument,
                  cat("--cuda-graphs needs a CUDA device (--device ", c.device.str(), " has no kernels to capture)"));
  // An update made inside backward cannot be skipped when the gradients overflow.
  if (fp16 && c.memory.optimizer_in_backward)
    return refuse(ErrorKind::Unsupported,
                  "--dtype fp16 with --optimizer-in-backward: an overflowing step could not be skipped");
  // Mixed precision's 16-bit weight copy is the whole model's, which stage 3 never holds.
  if (sixteen_bit && c.memory.zero >= 3)
    return refuse(ErrorKind::Unsupported, cat("--dtype ", bench::precision_name(c.math),
                                              " with --zero 3: stage 3 shards the fp32 weights only (use fp32 or "
                                              "tf32)"));
  if (std::string why = memory_steps_refusal(c.memory, layout); !why.empty())
    return refuse(ErrorKind::InvalidArgument, std::move(why));
  if (std::string why = c.memory.optimizer_in_backward ? ch07::optimizer_in_backward_refusal(c.step) : ""; !why.empty())
    return refuse(ErrorKind::InvalidArgument, std::move(why));
  if (std::string why = c.rungs.refusal(matmul_dtype(c.math)); !why.empty())
    return refuse(ErrorKind::InvalidArgument, std::move(why));
  if (c.rungs.lm_head == ch07::LmHead::Chunked && c.memory.zero >= 2)
    return refuse(ErrorKind::Unsupported,
                  cat("--lm-head chunked with --zero ", c.memory.zero,
                      ": the chunked head makes wte's gradient whole in the forward pass, and ZeRO stages 2 and 3 "
                      "reduce it chunk by chunk in backward (use --lm-head full, or --zero 1)"));
  if (c.rungs.lm_head == ch07::LmHead::Chunked && layout.tp > 1)
    return refuse(ErrorKind::Unsupported,
                  "--lm-head chunked with --tp: the vocabulary-parallel loss keeps its logits (use --lm-head full)");
  if (c.rungs.activations_16bit && (layout.tp > 1 || layout.pp > 1))
    return refuse(ErrorKind::Unsupported,
                  "--activations 16bit with --tp or --pp: the tensor- and pipeline-parallel functions exchange fp32 "
                  "activations (use data parallelism, or fp32 activations)");
  return std::nullopt;
}

void check_run(const RunConfig& config) {
  if (const std::optional<RunRefusal> refusal = run_refusal(config)) throw Error(refusal->kind, refusal->line);
}

TrainStepResult TrainingRun::run(const BatchSource& next_batch, double lr) {
  return graphed ? graphed->run(next_batch, lr) : step->run(next_batch, lr);
}

TrainingRun build_run(const RunConfig& config, const comm::ParallelContext& context, const SetWeights& set_weights) {
  check_run(config);
  LAB_CHECK(context.layout().str() == config.parallel.layout.str(), InvalidArgument, "build_run: the context's layout ",
            context.layout().str(), " is not the configuration's ", config.parallel.layout.str());
  apply_math_mode(config.device, config.math);
  TrainingRun run;
  // This rank's shard (its tp slice, its pipeline stage), then the model's rungs over whatever functions the
  // layout installed: a rung that a tensor-parallel shard cannot run refuses there.
  run.model = ch08::tp::model_for_rank(context, config.model, config.device);
  config.rungs.apply(run.model->options(), matmul_dtype(config.math));
  // Chapter 7's rungs choose the optimizer (sharded under ZeRO) and the step, chapter 8's layout otherwise.
  run.optimizer = make_optimizer(config.memory, context, config.parallel, *run.model, config.adamw);
  if (set_weights)
    set_weights(*run.model, *run.optimizer);
  else
    run.model->init_weights(1);
  run.step = make_step(config.memory, context, config.parallel, *run.model, *run.optimizer, config.step);
  // Mixed precision: the model's 16-bit matrix products (a copy of the weights just set) and, for fp16, loss
  // scaling.
  apply_math_mode(config.math, *run.step, config.loss_scaling);
  if (config.cuda_graphs) run.graphed = std::make_unique<ch09::GraphedStep>(*run.step);
  return run;
}

TrainingRun build_run(const RunConfig& config, const SetWeights& set_weights) {
  check_run(config);
  LAB_CHECK(config.parallel.layout.ranks() == 1, InvalidArgument, "build_run: a run of layout ",
            config.parallel.layout.str(), " needs the ranks' context");
  std::unique_ptr<comm::Communicator> world = std::make_unique<comm::SingleProcessCommunicator>();
  auto context = std::make_unique<comm::ParallelContext>(*world, config.parallel.layout);
  TrainingRun run = build_run(config, *context, set_weights);
  run.own_world = std::move(world);
  run.own_context = std::move(context);
  return run;
}

}  // namespace lab
