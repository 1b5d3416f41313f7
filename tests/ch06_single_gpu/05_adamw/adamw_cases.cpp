#include "tests/ch06_single_gpu/05_adamw/adamw_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <utility>

#include "ch06_single_gpu/flat_adamw.h"
#include "common/nn/gpt2.h"
#include "common/ops/adamw.h"
#include "common/util/rng.h"
#include "tests/support/op_check.h"

namespace lab::test {

std::vector<NamedLayout> adamw_layouts() {
  std::vector<NamedLayout> layouts;
  layouts.push_back({"gpt2_tiny", GPT2(GPT2Config::from_name("tiny"), Device::cpu()).parameters()});
  ParameterStore odd;
  odd.declare("w1", {3, 5}, true);
  odd.declare("b1", {1}, false);
  odd.declare("g1", {31}, false);
  odd.declare("w2", {33, 7}, true);
  odd.declare("b2", {33}, false);
  odd.declare("big", {4097}, false);
  odd.declare("w3", {1, 3}, true);
  ParameterStore odd_decay_first = odd;
  odd.allocate(Device::cpu());
  odd_decay_first.allocate(Device::cpu(), ParameterOrder::DecayFirst);
  layouts.push_back({"odd", odd});
  layouts.push_back({"odd_decay_first", odd_decay_first});
  return layouts;
}

std::vector<NamedProblem> adamw_problems() {
  std::vector<NamedProblem> problems;
  for (const auto& [name, table, grads] :
       {std::tuple{"fp32", ch06::AdamWTable::FP32, DType::F32}, std::tuple{"bf16", ch06::AdamWTable::BF16, DType::F32},
        std::tuple{"bf16_grads", ch06::AdamWTable::BF16, DType::BF16}}) {
    ch06::AdamWProblem usual;
    usual.table = table;
    usual.grad_dtype = grads;
    problems.push_back({cat(name, "_gpt2_hyper"), usual});
    ch06::AdamWProblem large = usual;
    large.hyper.lr = 1e-2f;
    large.hyper.weight_decay = 0.5f;
    large.hyper.step = 1;
    large.seed = 7;
    problems.push_back({cat(name, "_large_terms"), large});
  }
  return problems;
}

namespace {

// The mean of a tensor's elements (any float dtype, any device).
double mean_of(const Tensor& t) {
  const std::vector<float> x = t.to_floats();
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

}  // namespace

void expect_tiny_updates_survive_stochastic_rounding(Device device) {
  const int64_t n = 4096, steps = 100;
  const ops::AdamWHyper base{.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.0f};
  const Tensor ones = Tensor::from_floats(std::vector<float>(n, 1.0f), {n});
  const Tensor grads = Tensor::from_floats(std::vector<float>(n, 0.25f), {n}, device);
  // fp32 weights: the trajectory the bf16 ones should follow.
  const Tensor fp32 = ones.to(device), m32 = Tensor::zeros({n}, DType::F32, device),
               v32 = Tensor::zeros({n}, DType::F32, device);
  struct Bf16State {
    Tensor params, m, v;
  };
  auto bf16_state = [&] {
    return Bf16State{ones.to_dtype(DType::BF16).to(device), Tensor::zeros({n}, DType::F32, device),
                     Tensor::zeros({n}, DType::F32, device)};
  };
  const Bf16State nearest = bf16_state(), stochastic = bf16_state();
  for (int64_t t = 1; t <= steps; ++t) {
    ops::AdamWHyper h = base;
    h.step = t;
    ch06::flat_adamw(fp32, grads, m32, v32, h, 1.0f, {});
    ch06::flat_adamw_bf16(nearest.params, Tensor(), grads, nearest.m, nearest.v, h, 1.0f, {}, {false, 0});
    ch06::flat_adamw_bf16(stochastic.params, Tensor(), grads, stochastic.m, stochastic.v, h, 1.0f, {},
                          {true, static_cast<uint64_t>(1000 + t)});
  }
  const double target = mean_of(fp32), moved = 1.0 - target;
  ASSERT_GT(moved, 0.5 * static_cast<double>(steps) * base.lr) << "the fp32 weights should move by about lr a step";
  EXPECT_EQ(mean_of(nearest.params), 1.0) << "rounded to nearest, every update below half a bf16 step is lost";
  // Each element's bf16 value is the fp32 one plus zero-mean noise of a few bf16 steps (2^-8); over 4096
  // elements the mean's noise is ~1e-4, against a movement of ~1e-2.
  EXPECT_NEAR(mean_of(stochastic.params), target, 0.1 * moved) << "stochastic rounding keeps the updates on average";
}

void expect_stochastic_rounding_repeatable(Device device) {
  const int64_t n = 1000;
  std::vector<float> w(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    w[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 97) - 0.3f;
    g[static_cast<size_t>(i)] = 0.001f * static_cast<float>(i % 13) - 0.006f;
  }
  const ops::AdamWHyper h{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 3};
  auto step = [&](uint64_t seed) {
    const Tensor master = Tensor::from_floats(w, {n}, device);
    const Tensor params = master.to(Device::cpu()).to_dtype(DType::BF16).to(device);
    ch06::flat_adamw_bf16(params, master, Tensor::from_floats(g, {n}, device), Tensor::zeros({n}, DType::F32, device),
                          Tensor::zeros({n}, DType::F32, device), h, 1.0f, {{0, n / 2}}, {true, seed});
    return params.to_floats();
  };
  const std::vector<float> a = step(42), b = step(42), c = step(43);
  EXPECT_EQ(a, b) << "the same seed must give the same bits";
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += a[static_cast<size_t>(i)] != c[static_cast<size_t>(i)];
  EXPECT_GT(differ, n / 10) << "another seed should round many elements the other way";
}

void expect_decay_ranges_match_the_core(Device device) {
  const int64_t n = 6000;
  Rng rng(23);
  auto random = [&](float scale, bool square) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) {
      const float r = rng.normal(0.0f, scale);
      e = square ? r * r : r;
    }
    return Tensor::from_floats(x, {n});
  };
  const Tensor p = random(0.02f, false), g = random(0.01f, false), m = random(0.01f, false), v = random(0.01f, true);
  // 100 ranges 60 elements apart, of 1 to 40 elements (odd bounds: the scalar kernel), or the same rounded to
  // multiples of 4 (the vector kernel); either way more than one table of ranges, so more than one launch.
  auto spaced = [](int64_t multiple) {
    std::vector<ElementRange> ranges;
    for (int64_t r = 0; r < 100; ++r) {
      const int64_t begin = 60 * r + 1 + r % 7, size = 1 + (r * 13) % 40;
      ranges.push_back({begin / multiple * multiple, (begin + size) / multiple * multiple});
    }
    return ranges;
  };
  const ops::AdamWHyper h{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.5f, .step = 4};
  for (const auto& [name, decay] :
       {std::pair{"none", std::vector<ElementRange>{}}, std::pair{"all", std::vector<ElementRange>{{0, n}}},
        std::pair{"odd bounds", spaced(1)}, std::pair{"bounds on multiples of 4", spaced(4)}}) {
    SCOPED_TRACE(name);
    const Tensor ep = p.clone(), em = m.clone(), ev = v.clone();
    ops::cpu::adamw_update(ep, g, em, ev, h, 0.5f, decay);
    const Tensor dp = p.to(device), dm = m.to(device), dv = v.to(device);
    ch06::flat_adamw(dp, g.to(device), dm, dv, h, 0.5f, decay);
    const Tolerance tol = tolerance_for(DType::F32, 1);
    EXPECT_TRUE(all_close("params", dp, ep, tol));
    EXPECT_TRUE(all_close("m", dm, em, tol));
    EXPECT_TRUE(all_close("v", dv, ev, tol));
  }
}

}  // namespace lab::test
