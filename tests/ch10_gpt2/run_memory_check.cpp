// One run's peaks by category beside its theory (see run_memory_check.h).
#include "tests/ch10_gpt2/run_memory_check.h"

#include "ch10_gpt2/run_memory_theory.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

// The micro-batch of every step, on the run's device. Every rank draws the same one, as the ranks of one
// tensor-parallel group or one pipeline read the same batches.
MicroBatch theory_micro_batch(const RunConfig& config) {
  Rng rng(5);
  const Tensor inputs = random_ids({kTheoryRows, kTheorySeq}, rng, config.model.vocab_size);
  const Tensor targets = random_ids({kTheoryRows, kTheorySeq}, rng, config.model.vocab_size);
  return {inputs.to(config.device), targets.to(config.device)};
}

StepMemory measure_steps(const RunConfig& config, TrainingRun run, const comm::ParallelCoords& rank) {
  StepMemory out;
  out.theory = run_memory_theory(config, kTheoryRows, kTheorySeq, rank);
  const MicroBatch on_device = theory_micro_batch(config);
  const BatchSource source = [&] { return on_device; };
  run.run(source, 1e-3);
  allocator_for(config.device).reset_peak();
  run.run(source, 1e-3);
  const MemoryStats stats = memory_stats(config.device);
  for (int c = 0; c < kNumMemCategories; ++c) out.peak[static_cast<size_t>(c)] = stats.peak[static_cast<size_t>(c)];
  return out;
}

}  // namespace

StepMemory measure_step_memory(const RunConfig& config) {
  return measure_steps(config, build_run(config), {});
}

StepMemory measure_step_memory(const RunConfig& config, const comm::ParallelContext& context) {
  return measure_steps(config, build_run(config, context), context.coords());
}

int64_t stored_activations_of_one_micro_batch(const RunConfig& config, const comm::ParallelContext& context) {
  const TrainingRun run = build_run(config, context);
  const GPT2& model = *run.model;
  const MicroBatch batch = theory_micro_batch(config);
  const int64_t before = memory_stats(config.device).live_of(MemCategory::Activations);
  Tape tape;
  Var input;
  if (context.is_first_stage()) {
    input = model.embed(tape, batch.inputs);
  } else {
    MemoryScope scope(MemCategory::Activations);  // as PipelineStage receives it
    input = Var(Tensor::empty({kTheoryRows, kTheorySeq, config.model.n_embd}, DType::F32, config.device), true);
  }
  const Var output = model.forward_blocks(tape, input);
  Tensor losses;
  if (context.is_last_stage()) losses = model.head_loss(tape, output, batch.targets);
  return memory_stats(config.device).live_of(MemCategory::Activations) - before;
}

RunConfig tiny_theory_run(Device device) {
  RunConfig config;
  config.model = tiny_gpt2_config(64, 2, 2, 64);
  config.device = device;
  config.step.grad_clip = 0;  // the optimizer in backward cannot clip
  return config;
}

}  // namespace lab::test
