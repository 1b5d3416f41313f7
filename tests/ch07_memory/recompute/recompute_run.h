// One forward and backward of a GPT-2 under a recompute policy, with what the recompute tests compare: the
// per-position losses, the flat gradient buffer and the activation peak the allocator measured.
#pragma once

#include <vector>

#include "ch06_single_gpu/fused_model.h"
#include "ch07_memory/recompute.h"
#include "common/autograd/tape.h"
#include "common/core/memory.h"
#include "common/nn/gpt2.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

struct RecomputeRun {
  std::vector<float> losses;
  std::vector<float> grads;
  int64_t activation_peak = 0;  // above the activation bytes live before the forward
  int hooks_run = 0;            // gradient hooks run (each parameter's once, when its gradient is final)
};

// With `matmul` bf16 or f16, the model's products read 16-bit operands (GPT2::set_matmul_dtype), and with
// `activations_16bit` its activations are in that dtype too (ModelOptions::activations); `kernels` chapter 6's
// (--kernels fused) or the core's.
inline RecomputeRun run_with_recompute(const GPT2Config& config, Device device, ch07::RecomputePolicy policy,
                                       int64_t batch, int64_t seq, bool init = true, DType matmul = DType::F32,
                                       bool activations_16bit = false,
                                       ch06::Kernels kernels = ch06::Kernels::Reference) {
  ModelOptions options = ch06::with_kernels({}, kernels);
  ch07::apply_recompute(options, policy);
  if (activations_16bit) options.activations = matmul;
  GPT2 model(config, device, options);
  if (init) model.init_weights(7);
  model.set_matmul_dtype(matmul);
  Rng rng(11);
  const Tensor tokens = random_ids({batch, seq}, rng, config.vocab_size).to(device);
  const Tensor targets = random_ids({batch, seq}, rng, config.vocab_size).to(device);
  RecomputeRun run;
  for (const ParamInfo& p : model.parameters().infos())
    model.parameters().var(p.name).set_gradient_hook([&run] { ++run.hooks_run; });
  model.parameters().zero_grad();
  allocator_for(device).reset_peak();
  const int64_t before = memory_stats(device).live_of(MemCategory::Activations);
  {
    Tape tape;
    const Tensor losses = model.loss(tape, tokens, targets);
    tape.backward();
    run.losses = losses.to_floats();
  }
  run.activation_peak = memory_stats(device).peak_of(MemCategory::Activations) - before;
  run.grads = model.parameters().grads().to_floats();
  return run;
}

}  // namespace lab::test
