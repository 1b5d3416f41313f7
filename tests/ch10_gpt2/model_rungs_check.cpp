#include "tests/ch10_gpt2/model_rungs_check.h"

#include <gtest/gtest.h>

#include <vector>

#include "ch10_gpt2/model_rungs.h"
#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/util/rng.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

struct Pass {
  std::vector<float> losses, grads;
};

// 2 blocks of 4 heads, 64 wide; 2 x 80 tokens: past one of flash attention's 64-row tiles.
Pass forward_backward(const ModelRungs& rungs, Device device, DType matmul) {
  const GPT2Config config = tiny_gpt2_config(97, 2, 4, 64, 96);
  ModelOptions options;
  rungs.apply(options, matmul);
  GPT2 model(config, device, options);
  model.init_weights(3);
  model.set_matmul_dtype(matmul);
  Rng rng(4);
  const Tensor tokens = random_ids({2, 80}, rng, config.vocab_size).to(device);
  const Tensor targets = random_ids({2, 80}, rng, config.vocab_size).to(device);
  model.parameters().zero_grad();
  Pass pass;
  {
    Tape tape;
    pass.losses = model.loss(tape, tokens, targets).to_floats();
    tape.backward();
  }
  pass.grads = model.parameters().grads().to_floats();
  return pass;
}

}  // namespace

void expect_every_compatible_combination_matches_the_plain_model(Device device, DType matmul, double tolerance,
                                                                 bool activations_16bit) {
  const Pass plain = forward_backward(ModelRungs{}, device, matmul);
  int compared = 0;
  for (ModelRungs rungs : every_model_rungs()) {
    rungs.activations_16bit = activations_16bit;
    SCOPED_TRACE(rungs.str());
    const std::string why = rungs.incompatibility();
    if (!why.empty()) {
      testing::expect_error([&] { forward_backward(rungs, device, matmul); }, ErrorKind::InvalidArgument, {why});
      continue;
    }
    const Pass pass = forward_backward(rungs, device, matmul);
    EXPECT_LT(max_scaled_error(pass.losses, plain.losses), tolerance);
    EXPECT_LT(max_scaled_error(pass.grads, plain.grads), tolerance);
    ++compared;
  }
  // 64 combinations, of which batched + selective or selective-ln (with either kernels and either head) cannot
  // compose.
  EXPECT_EQ(compared, 56);
}

}  // namespace lab::test
