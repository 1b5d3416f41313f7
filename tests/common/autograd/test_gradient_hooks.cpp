// Gradient hooks: a parameter's hook runs once the tape has run the last backward step that adds to its
// gradient, during backward and not before. On GPT-2: every parameter's hook runs exactly once per backward, in
// the order of the backward-ordered buffer, the first long before backward ends; wte's (two contributions,
// the LM head's first and the embedding's last) runs at the very end, when its gradient is complete.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/autograd/functions.h"
#include "common/nn/gpt2.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

GPT2Config tiny() {
  return GPT2Config::from_name("tiny");
}

TEST(GradientHooks, RunWhenTheLastContributionIsAdded) {
  Rng rng(3);
  const Var w = Var::parameter(test::random_normal({4, 3}, rng), Tensor::zeros({4, 3}, DType::F32));
  const Var x(test::random_normal({2, 3}, rng));
  Tape tape;
  std::vector<std::string> events;
  int fired_with_steps_left = -1;
  w.set_gradient_hook([&] {
    events.push_back("w final");
    fired_with_steps_left = static_cast<int>(tape.size());
  });
  // w is used twice; a third step, recorded first, runs last and adds to x only.
  const Var y1 = ag::linear(tape, x, w, Var());
  const Var y2 = ag::linear(tape, x, w, Var());
  const Var y = ag::residual(tape, y1, y2);
  EXPECT_EQ(w.pending_gradient_steps(), 2);
  y.grad().fill_(1.0f);
  const Tensor before = w.grad().clone();
  tape.backward();
  EXPECT_EQ(events, std::vector<std::string>{"w final"});
  EXPECT_EQ(fired_with_steps_left, 0);  // after the last of its two steps, the first recorded
  EXPECT_EQ(w.pending_gradient_steps(), 0);
  EXPECT_NE(w.grad().to_floats(), before.to_floats());
}

TEST(GradientHooks, ATapeDroppedUnrunLeavesNothingPending) {
  Rng rng(4);
  const Var w = Var::parameter(test::random_normal({3, 3}, rng), Tensor::zeros({3, 3}, DType::F32));
  int fired = 0;
  w.set_gradient_hook([&] { ++fired; });
  {
    Tape tape;
    ag::linear(tape, Var(test::random_normal({1, 3}, rng)), w, Var());
    EXPECT_EQ(w.pending_gradient_steps(), 1);
  }
  EXPECT_EQ(w.pending_gradient_steps(), 0);
  EXPECT_EQ(fired, 0);
}

TEST(GradientHooks, GPT2ParametersBecomeFinalInBufferOrderDuringBackward) {
  GPT2 model(tiny(), Device::cpu());
  model.init_weights(5);
  ParameterStore& params = model.parameters();
  Rng rng(6);
  const Tensor tokens = test::random_ids({2, 8}, rng, 50257), targets = test::random_ids({2, 8}, rng, 50257);
  Tape tape;
  std::vector<std::string> order;
  std::map<std::string, size_t> steps_left;
  for (const ParamInfo& p : params.infos())
    params.var(p.name).set_gradient_hook([&, name = p.name] {
      order.push_back(name);
      steps_left[name] = tape.size();
    });
  model.loss(tape, tokens, targets);
  const size_t recorded = tape.size();
  tape.backward();
  for (const ParamInfo& p : params.infos()) params.var(p.name).set_gradient_hook({});

  ASSERT_EQ(order.size(), params.infos().size()) << "every parameter's hook runs exactly once";
  // In buffer order, each parameter's gradient becomes final no earlier than the one before it (a linear's
  // weight and bias, completed by one step, tie).
  std::vector<const ParamInfo*> by_offset;
  for (const ParamInfo& p : params.infos()) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ParamInfo* a, const ParamInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    EXPECT_LE(steps_left.at(by_offset[i]->name), steps_left.at(by_offset[i - 1]->name))
        << by_offset[i]->name << " is final before " << by_offset[i - 1]->name << ", which precedes it in the buffer";
  EXPECT_EQ(steps_left.at("wte.weight"), 0u);  // after its second contribution, the embedding's, the last step
  EXPECT_GE(steps_left.at("ln_f.weight"), recorded - 3) << "ln_f's gradient is final right after the LM head's";
  EXPECT_GT(steps_left.at("h.1.mlp.c_proj.weight"), recorded / 2) << "the last block finishes early in backward";
}

}  // namespace
}  // namespace lab
