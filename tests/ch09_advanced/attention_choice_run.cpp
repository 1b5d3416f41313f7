#include "tests/ch09_advanced/attention_choice_run.h"

#include "common/core/memory.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

AttentionRun run_attention_function(const ModelOptions::AttentionFn& attention, const Tensor& qkv, const Tensor& dout,
                                    int n_head, Device device) {
  Var x(qkv.to(device), true);
  Tape tape;
  const Var out = attention(tape, x, n_head);
  out.grad().copy_from(dout.to(device));
  tape.backward();
  return {out.value().to_floats(), x.grad().to_floats()};
}

TrainingRun train_tiny_gpt2(ch09::Attention attention, DType matmul, Device device, int steps) {
  const GPT2Config config = tiny_gpt2_config(97, 2, 4, 64, 160);
  ModelOptions options;
  ch09::use_attention(options, attention, matmul);
  GPT2 model(config, device, options);
  model.init_weights(5);
  AdamW optimizer(model.parameters(), AdamWConfig{});
  TrainStep step(model, optimizer, TrainStepConfig{1, 1.0, false});
  model.set_matmul_dtype(matmul);
  Rng rng(9);
  const Tensor tokens = random_ids({2, 130}, rng, config.vocab_size).to(device);
  const Tensor targets = random_ids({2, 130}, rng, config.vocab_size).to(device);
  TrainingRun run;
  allocator_for(device).reset_peak();
  const int64_t before = memory_stats(device).live_of(MemCategory::Activations);
  for (int s = 0; s < steps; ++s) {
    run.losses.push_back(step.run([&] { return MicroBatch{tokens, targets}; }, 1e-3).loss);
    if (s == 0) run.activation_peak = memory_stats(device).peak_of(MemCategory::Activations) - before;
  }
  return run;
}

}  // namespace lab::test
