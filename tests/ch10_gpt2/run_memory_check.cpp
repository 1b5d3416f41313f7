// One run's peaks by category beside its theory (see run_memory_check.h).
#include "tests/ch10_gpt2/run_memory_check.h"

#include "ch10_gpt2/run_memory_theory.h"
#include "tests/support/test_support.h"

namespace lab::test {

StepMemory measure_step_memory(const RunConfig& config) {
  StepMemory out;
  out.theory = run_memory_theory(config, kTheoryRows, kTheorySeq);
  TrainingRun run = build_run(config);
  Rng rng(5);
  const MicroBatch batch{random_ids({kTheoryRows, kTheorySeq}, rng, config.model.vocab_size),
                         random_ids({kTheoryRows, kTheorySeq}, rng, config.model.vocab_size)};
  const MicroBatch on_device{batch.inputs.to(config.device), batch.targets.to(config.device)};
  const BatchSource source = [&] { return on_device; };
  run.run(source, 1e-3);
  allocator_for(config.device).reset_peak();
  run.run(source, 1e-3);
  const MemoryStats stats = memory_stats(config.device);
  for (int c = 0; c < kNumMemCategories; ++c) out.peak[static_cast<size_t>(c)] = stats.peak[static_cast<size_t>(c)];
  return out;
}

RunConfig tiny_theory_run(Device device) {
  RunConfig config;
  config.model = tiny_gpt2_config(64, 2, 2, 64);
  config.device = device;
  config.step.grad_clip = 0;  // the optimizer in backward cannot clip
  return config;
}

}  // namespace lab::test
