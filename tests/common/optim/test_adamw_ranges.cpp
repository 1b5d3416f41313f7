// AdamW with weight decay by ranges: the op decays exactly the elements inside the ranges (against the
// uniform op applied stretch by stretch), refuses ranges that are not sorted, disjoint and inside the buffer,
// and the optimizer over GPT-2's backward-ordered buffer makes, parameter by parameter, the update it makes
// over the decay-first layout (the same math whatever the layout). With its step values staged on the device
// (CUDA graphs' form: AdamW::stage_step), the optimizer makes the updates it makes from numbers, bit for bit. Given
// the model's 16-bit copy, the update writes it as a refresh from the updated weights would, bit for bit.
#include <gtest/gtest.h>

#include "common/nn/gpt2.h"
#include "common/ops/convert.h"
#include "common/optim/adamw.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

struct State {
  Tensor p, g, m, v;
};

State random_state(int64_t n, Rng& rng) {
  std::vector<float> v = test::random_normal({n}, rng, 0.1f).to_floats();
  for (float& x : v) x *= x;
  return {test::random_normal({n}, rng), test::random_normal({n}, rng), test::random_normal({n}, rng, 0.1f),
          Tensor::from_floats(v, {n})};
}

State copy_of(const State& s) {
  return {s.p.clone(), s.g.clone(), s.m.clone(), s.v.clone()};
}

Tensor part(const Tensor& t, int64_t begin, int64_t end) {
  return t.view(begin, {end - begin});
}

TEST(AdamWRanges, DecayAppliesExactlyInsideTheRanges) {
  Rng rng(11);
  const int64_t n = 1000;
  const std::vector<ElementRange> decay = {{0, 3}, {64, 65}, {100, 400}, {999, 1000}};
  const ops::AdamWHyper h{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f, .step = 3};
  const State ranged = random_state(n, rng);
  const State stretches = copy_of(ranged);
  ops::adamw_update(ranged.p, ranged.g, ranged.m, ranged.v, h, 0.7f, decay);

  // The uniform op over each stretch, with the decay or without it.
  int64_t at = 0;
  auto update = [&](int64_t begin, int64_t end, float weight_decay) {
    ops::AdamWHyper stretch = h;
    stretch.weight_decay = weight_decay;
    ops::adamw_update(part(stretches.p, begin, end), part(stretches.g, begin, end), part(stretches.m, begin, end),
                      part(stretches.v, begin, end), stretch, 0.7f);
  };
  for (const ElementRange& r : decay) {
    if (r.begin > at) update(at, r.begin, 0.0f);
    update(r.begin, r.end, h.weight_decay);
    at = r.end;
  }
  if (at < n) update(at, n, 0.0f);
  EXPECT_EQ(ranged.p.to_floats(), stretches.p.to_floats());
  EXPECT_EQ(ranged.m.to_floats(), stretches.m.to_floats());
  EXPECT_EQ(ranged.v.to_floats(), stretches.v.to_floats());

  // And the decay did something: the same step without any range differs exactly inside them.
  const State none = random_state(n, rng);
  const State all = copy_of(none);
  ops::adamw_update(none.p, none.g, none.m, none.v, h, 0.7f, {});
  ops::adamw_update(all.p, all.g, all.m, all.v, h, 0.7f, decay);
  const std::vector<float> a = none.p.to_floats(), b = all.p.to_floats();
  for (int64_t i = 0; i < n; ++i) {
    bool inside = false;
    for (const ElementRange& r : decay) inside = inside || (r.begin <= i && i < r.end);
    EXPECT_EQ(a[i] != b[i], inside) << i;
  }
}

TEST(AdamWRanges, RangesMustBeSortedDisjointAndInside) {
  Rng rng(12);
  const State s = random_state(10, rng);
  const ops::AdamWHyper h;
  for (const std::vector<ElementRange>& bad :
       std::vector<std::vector<ElementRange>>{{{5, 8}, {2, 3}}, {{0, 5}, {4, 6}}, {{8, 11}}, {{-1, 2}}, {{3, 2}}})
    testing::expect_error([&] { ops::adamw_update(s.p, s.g, s.m, s.v, h, 1.0f, bad); }, ErrorKind::InvalidArgument,
                          {"decay range"});
}

// The same parameters, declared alike, laid out in the two orders: AdamW's update of each is the same.
TEST(AdamWRanges, TheUpdateOfEachParameterDoesNotDependOnTheLayout) {
  const GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  ParameterStore backward, decay_first;
  for (const ParamInfo& p : model.parameters().infos()) {
    backward.declare(p.name, p.shape, p.decay);
    decay_first.declare(p.name, p.shape, p.decay);
  }
  backward.allocate(Device::cpu(), ParameterOrder::Backward);
  decay_first.allocate(Device::cpu(), ParameterOrder::DecayFirst);
  EXPECT_EQ(decay_first.decay_ranges().size(), 1u);
  EXPECT_GT(backward.decay_ranges().size(), 1u);
  Rng rng(13);
  for (const ParamInfo& p : backward.infos()) {
    const Tensor value = test::random_normal(p.shape, rng), grad = test::random_normal(p.shape, rng);
    backward.value(p.name).copy_from(value);
    decay_first.value(p.name).copy_from(value);
    backward.grad(p.name).copy_from(grad);
    decay_first.grad(p.name).copy_from(grad);
  }
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f};
  AdamW a(backward, config), b(decay_first, config);
  for (int step = 0; step < 3; ++step) {
    a.step(1e-2f, 0.9f);
    b.step(1e-2f, 0.9f);
  }
  for (const ParamInfo& p : backward.infos()) {
    EXPECT_EQ(backward.value(p.name).to_floats(), decay_first.value(p.name).to_floats()) << p.name;
    EXPECT_EQ(a.m(p.name).to_floats(), b.m(p.name).to_floats()) << p.name;
    EXPECT_EQ(a.v(p.name).to_floats(), b.v(p.name).to_floats()) << p.name;
  }
  testing::expect_error([&] { (void)backward.decay_numel(); }, ErrorKind::InvalidArgument, {"decay_ranges"});
}

// lr and the bias corrections read from a tensor (ops::AdamWHyper::step_values) give the update of the numbers.
TEST(AdamWRanges, StepValuesReadFromATensorGiveTheUpdateOfTheNumbers) {
  Rng rng(14);
  const State s = random_state(300, rng), staged = copy_of(s);
  ops::AdamWHyper h{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 7};
  ops::adamw_update(s.p, s.g, s.m, s.v, h, 0.5f, {{10, 200}});
  h.step_values = Tensor::from_floats(ops::adamw_step_values(h), {ops::kStepValues});
  h.lr = 99.0f;  // unused: the tensor's values count
  h.step = 0;
  ops::adamw_update(staged.p, staged.g, staged.m, staged.v, h, 0.5f, {{10, 200}});
  EXPECT_EQ(staged.p.to_floats(), s.p.to_floats());
  EXPECT_EQ(staged.m.to_floats(), s.m.to_floats());
  EXPECT_EQ(staged.v.to_floats(), s.v.to_floats());
  h.step_values = Tensor::zeros({2}, DType::F32);
  testing::expect_error([&] { ops::adamw_update(s.p, s.g, s.m, s.v, h, 1.0f); }, ErrorKind::InvalidArgument,
                        {"step_values has 2 elements"});
}

// Given the parameters' 16-bit copy, the update also writes them there, rounded as ops::convert rounds them (bit for
// bit), and updates exactly as without it; a copy of another type or size is refused.
TEST(AdamWRanges, TheUpdateWritesThe16BitCopyAsConvertRoundsIt) {
  Rng rng(15);
  for (const DType dtype : {DType::BF16, DType::F16}) {
    const State plain = random_state(300, rng), with_copy = copy_of(plain);
    const ops::AdamWHyper h{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 4};
    const Tensor copy = Tensor::zeros({300}, dtype);
    ops::adamw_update(plain.p, plain.g, plain.m, plain.v, h, 0.5f, {{10, 200}});
    ops::adamw_update(with_copy.p, with_copy.g, with_copy.m, with_copy.v, h, 0.5f, {{10, 200}}, copy);
    EXPECT_EQ(with_copy.p.to_floats(), plain.p.to_floats()) << dtype_name(dtype);
    EXPECT_EQ(with_copy.v.to_floats(), plain.v.to_floats()) << dtype_name(dtype);
    const Tensor rounded = Tensor::empty({300}, dtype);
    ops::convert(rounded, plain.p);
    EXPECT_EQ(copy.to_floats(), rounded.to_floats()) << dtype_name(dtype);
  }
  const State s = random_state(8, rng);
  const ops::AdamWHyper h{.step = 1};
  testing::expect_error([&] { ops::adamw_update(s.p, s.g, s.m, s.v, h, 1.0f, {}, Tensor::zeros({8}, DType::F32)); },
                        ErrorKind::InvalidArgument, {"must be bf16 or f16, got f32"});
  testing::expect_error([&] { ops::adamw_update(s.p, s.g, s.m, s.v, h, 1.0f, {}, Tensor::zeros({9}, DType::BF16)); },
                        ErrorKind::InvalidArgument, {"a 16-bit copy of 9 elements for 8 parameters"});
}

// The optimizer writes the model's 16-bit copy in its step, or parameter by parameter in update(), as the model's
// refresh from the updated weights would; a sharded optimizer refuses (it does not update the whole buffer).
TEST(AdamWRanges, StepWith16BitCopyLeavesTheModelsCopyAsARefreshWould) {
  GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  model.init_weights(3);
  model.set_matmul_dtype(DType::BF16);
  Rng rng(16);
  model.parameters().grads().copy_from(test::random_normal({model.parameters().numel()}, rng));
  AdamW optimizer(model.parameters(), AdamWConfig{});
  optimizer.step_with_16bit_copy(1e-2f, 0.5f, model.params_16bit());
  const std::vector<float> written = model.params_16bit().to_floats();
  model.refresh_matmul_weights();
  EXPECT_EQ(written, model.params_16bit().to_floats());

  optimizer.begin_step();
  for (const ParamInfo& p : model.parameters().infos())
    optimizer.update(p.name, model.parameters().grad(p.name), 1e-2f, model.params_16bit());
  const std::vector<float> written_by_updates = model.params_16bit().to_floats();
  model.refresh_matmul_weights();
  EXPECT_EQ(written_by_updates, model.params_16bit().to_floats());
  EXPECT_NE(written_by_updates, written);  // the second step changed the weights

  AdamW sharded(model.parameters(), AdamWConfig{}, std::vector<ElementRange>{{0, 100}});
  testing::expect_error([&] { sharded.step_with_16bit_copy(1e-2f, 1.0f, model.params_16bit()); },
                        ErrorKind::InvalidArgument, {"sharded optimizer does not update the whole buffer"});
}

// The optimizer with its step values staged before each step trains as the one given numbers; a step without its
// values staged, and the per-parameter update, are refused.
TEST(AdamWRanges, StagedStepsMatchStepsFromNumbers) {
  const GPT2 model(GPT2Config::from_name("tiny"), Device::cpu());
  ParameterStore plain, staged;
  for (const ParamInfo& p : model.parameters().infos()) {
    plain.declare(p.name, p.shape, p.decay);
    staged.declare(p.name, p.shape, p.decay);
  }
  plain.allocate(Device::cpu(), ParameterOrder::Backward);
  staged.allocate(Device::cpu(), ParameterOrder::Backward);
  Rng rng(15);
  const Tensor values = test::random_normal({plain.numel()}, rng);
  plain.params().copy_from(values);
  staged.params().copy_from(values);
  const AdamWConfig config{.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  AdamW a(plain, config), b(staged, config);
  for (int step = 0; step < 4; ++step) {
    const Tensor grads = test::random_normal({plain.numel()}, rng);
    plain.grads().copy_from(grads);
    staged.grads().copy_from(grads);
    const float lr = 1e-2f / static_cast<float>(step + 1);
    a.step(lr, 0.7f);
    b.stage_step(lr);
    b.step(123.0f, 0.7f);  // the staged lr counts
  }
  EXPECT_TRUE(b.steps_staged());
  EXPECT_EQ(b.steps_taken(), 4);
  EXPECT_EQ(staged.params().to_floats(), plain.params().to_floats());
  EXPECT_EQ(b.m().to_floats(), a.m().to_floats());
  testing::expect_error([&] { b.step(1e-2f); }, ErrorKind::InvalidArgument, {"staged for step 4"});
  b.begin_step();
  testing::expect_error([&] { b.update(staged.infos()[0].name, staged.grads().view(0, {1}), 1e-2f); },
                        ErrorKind::InvalidArgument, {"whole steps only"});
}

}  // namespace
}  // namespace lab
