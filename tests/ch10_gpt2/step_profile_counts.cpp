#include "tests/ch10_gpt2/step_profile_counts.h"

#include "common/core/step_profile.h"
#include "common/nn/gpt2.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

// The GPT-2 of count_one_step: a vocabulary of 97 padded to 128, 16 positions, 32 wide.
constexpr int64_t kPaddedVocab = 128, kMaxT = 16, kWidth = 32;

}  // namespace

ZeroFills expected_zero_fills(int64_t layers, Device device) {
  // On CUDA every parameter's gradient is written over by its first contribution (wpe's by the embedding's backward:
  // a step of kMaxT tokens reaches every row): only the step's three f32 scalars.
  if (device.is_cuda()) return {1, 3 * 4};
  const int64_t block_parameters = 12 * kWidth * kWidth + 13 * kWidth;
  const int64_t parameters = kPaddedVocab * kWidth + kMaxT * kWidth + 2 * kWidth + layers * block_parameters;
  return {2, 4 * parameters + 3 * 4};  // the whole f32 gradient buffer and the step's scalars
}

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
  return {profile.calls(ProfileKind::Op), profile.calls(ProfileKind::Kernel), profile.zero_fills(),
          profile.table(ProfileKind::Op), profile.table(ProfileKind::Kernel)};
}

}  // namespace lab::test
