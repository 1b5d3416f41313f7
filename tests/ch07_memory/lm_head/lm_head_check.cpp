#include "tests/ch07_memory/lm_head/lm_head_check.h"

#include <gtest/gtest.h>

#include "ch07_memory/chunked_lm_head.h"
#include "common/autograd/tape.h"
#include "common/core/memory.h"
#include "common/nn/gpt2.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

HeadRun run_head(Device device, const HeadCase& c, int64_t chunk_rows, int64_t B, int64_t T) {
  const GPT2Config config = tiny_gpt2_config(97, 2, 4, 64, 96);
  ModelOptions options;
  options.classifier = c.classifier;
  if (c.activations_16bit) options.activations = c.matmul;
  if (chunk_rows > 0)
    options.head_loss = [chunk_rows](Tape& tape, const Var& h, const Linear& head, const Tensor& targets, int64_t vocab,
                                     const ops::GradScale& scale, const ModelOptions& o) {
      return ch07::chunked_head_loss(tape, h, head, targets, vocab, scale, o, chunk_rows);
    };
  GPT2 model(config, device, options);
  model.init_weights(3);
  model.set_matmul_dtype(c.matmul);
  Rng rng(4);
  const Tensor tokens = random_ids({B, T}, rng, config.vocab_size).to(device);
  const Tensor targets = random_ids({B, T}, rng, config.vocab_size).to(device);
  HeadRun run;
  model.parameters().var("wte.weight").set_gradient_hook([&run] { ++run.wte_gradient_hooks; });
  model.parameters().zero_grad();
  {
    const int64_t before = memory_stats(device).live_of(MemCategory::Activations);
    Tape tape;
    const Tensor losses = model.loss(tape, tokens, targets);
    run.kept = memory_stats(device).live_of(MemCategory::Activations) - before;
    tape.backward();
    run.losses = losses.to_floats();
  }
  run.grads = model.parameters().grads().to_floats();
  return run;
}

void expect_chunked_head_matches_full(Device device, const HeadCase& c, double tolerance) {
  const int64_t B = 2, T = 40;  // 80 rows
  const HeadRun full = run_head(device, c, 0, B, T);
  EXPECT_EQ(full.wte_gradient_hooks, 1);
  for (const int64_t chunk : {16, 7, 1, 1000}) {
    SCOPED_TRACE(cat("chunks of ", chunk, " rows"));
    const HeadRun chunked = run_head(device, c, chunk, B, T);
    EXPECT_LT(max_scaled_error(chunked.losses, full.losses), tolerance);
    EXPECT_LT(max_scaled_error(chunked.grads, full.grads), tolerance);
    EXPECT_EQ(chunked.wte_gradient_hooks, 1);
    EXPECT_LT(chunked.kept, full.kept);
  }
}

}  // namespace lab::test
