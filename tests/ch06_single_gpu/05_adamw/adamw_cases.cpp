#include "tests/ch06_single_gpu/05_adamw/adamw_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ch06_single_gpu/flat_adamw.h"
#include "common/nn/gpt2.h"

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
  odd.allocate(Device::cpu());
  layouts.push_back({"odd", odd});
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
    ch06::flat_adamw(fp32, grads, m32, v32, h, 1.0f, n);
    ch06::flat_adamw_bf16(nearest.params, Tensor(), grads, nearest.m, nearest.v, h, 1.0f, n, {false, 0});
    ch06::flat_adamw_bf16(stochastic.params, Tensor(), grads, stochastic.m, stochastic.v, h, 1.0f, n,
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
                          Tensor::zeros({n}, DType::F32, device), h, 1.0f, n / 2, {true, seed});
    return params.to_floats();
  };
  const std::vector<float> a = step(42), b = step(42), c = step(43);
  EXPECT_EQ(a, b) << "the same seed must give the same bits";
  int differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += a[static_cast<size_t>(i)] != c[static_cast<size_t>(i)];
  EXPECT_GT(differ, n / 10) << "another seed should round many elements the other way";
}

}  // namespace lab::test
