#include "tests/ch10_gpt2/step_profile_counts.h"

#include "common/core/step_profile.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

StepCounts count_one_step(Device device, int64_t layers, DType dtype, ModelOptions options) {
  options.activations = dtype;
  GPT2 model(tiny_gpt2_config(97, layers, 2, 32, 16), device, options);
  model.init_weights(1);
  if (dtype != DType::F32) model.set_matmul_dtype(dtype);
  AdamW optimizer(model.parameters(), AdamWConfig{});
  TrainStep step(model, optimizer, TrainStepConfig{1, 1.0, false});
  Rng rng(2);
  const Tensor tokens = random_ids({2, 16}, rng, 97).to(device);
  const BatchSource batch = [&] { return MicroBatch{tokens, tokens}; };
  step.run(batch, 1e-3);
  StepProfile profile;
  step.run(batch, 1e-3);
  profile.close();
  return {profile.calls(ProfileKind::Op), profile.calls(ProfileKind::Kernel), profile.table(ProfileKind::Op),
          profile.table(ProfileKind::Kernel)};
}

}  // namespace lab::test
