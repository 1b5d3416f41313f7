#include "tests/ch10_gpt2/first_contributions.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "common/autograd/tape.h"
#include "common/nn/gpt2.h"
#include "common/nn/parameters.h"
#include "common/optim/adamw.h"
#include "common/train/train_step.h"
#include "common/util/rng.h"
#include "tests/support/op_check.h"
#include "tests/support/test_support.h"

namespace lab::test {

namespace {

constexpr int kVocab = 97;

struct Run {
  GPT2 model;
  AdamW optimizer;
  Run(Device device, DType dtype, const ModelOptions& options)
      : model(tiny_gpt2_config(kVocab, 2, 2, 32, 16), device, options), optimizer(model.parameters(), AdamWConfig{}) {
    model.init_weights(1);
    if (dtype != DType::F32) model.set_matmul_dtype(dtype);
  }
};

}  // namespace

void expect_step_writes_every_gradient(const std::string& what, Device device, DType dtype, ModelOptions options,
                                       int64_t accum_steps) {
  options.activations = dtype;
  Rng rng(7);
  std::vector<MicroBatch> batches;
  for (int64_t i = 0; i < 2 * accum_steps; ++i)
    batches.push_back({random_ids({2, 12}, rng, kVocab).to(device), random_ids({2, 12}, rng, kVocab).to(device)});

  Run stepped(device, dtype, options), by_hand(device, dtype, options);
  const TrainStepConfig config{accum_steps, 1.0, false};
  TrainStep step(stepped.model, stepped.optimizer, config), first(by_hand.model, by_hand.optimizer, config);
  size_t next = 0;
  const BatchSource source = [&] { return batches[next++ % batches.size()]; };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ParameterStore& params = stepped.model.parameters();
  for (int s = 0; s < 2; ++s) {
    for (const ParamInfo& p : params.infos()) params.grad(p.name).fill_(nan);  // the padding stays zero
    step.run(source, 1e-3);
  }
  // The same first step, then the second step's gradients summed into zeros by hand.
  next = 0;
  first.run(source, 1e-3);
  by_hand.model.parameters().zero_grad();
  for (int64_t m = 0; m < accum_steps; ++m) {
    const MicroBatch& batch = batches[static_cast<size_t>(accum_steps + m)];
    Tape tape;
    by_hand.model.loss(tape, batch.inputs, batch.targets, 1.0f / static_cast<float>(accum_steps));
    tape.backward();
  }
  for (const ParamInfo& p : params.infos()) {
    const Tensor got = params.grad(p.name), want = by_hand.model.parameters().grad(p.name);
    EXPECT_TRUE(all_close((what + ": " + p.name).c_str(), got, want, tolerance_for(DType::F32, 64)));
  }
  // Nothing wrote into the padding between the parameters (the gradient norm reads the whole buffer).
  const std::vector<float> flat = params.grads().to_floats();
  std::vector<bool> in_a_parameter(flat.size(), false);
  for (const ParamInfo& p : params.infos())
    for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) in_a_parameter[static_cast<size_t>(i)] = true;
  for (size_t i = 0; i < flat.size(); ++i) {
    if (!in_a_parameter[i]) {
      EXPECT_EQ(flat[i], 0.0f) << what << ": padding element " << i;
    }
  }
}

}  // namespace lab::test
