// Finite-difference checks of every op's backward, through the autograd functions that wrap them.
//
// For an op y = f(x...), the scalar L = sum_i r_i y_i with fixed random r has dL/dy = r; we seed y's
// gradient with r, run the tape backward, and compare each input's gradient with central differences of L
// computed by re-running the forward op in double-checked float. Shapes are small and deliberately odd.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/autograd/functions.h"
#include "common/ops/classifier.h"
#include "common/ops/layernorm.h"
#include "common/ops/linear.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::expect_gradient_close;
using test::random_normal;

// L = sum r * y, in double.
double weighted_sum(const Tensor& y, const Tensor& r) {
  const std::vector<float> yv = y.to_floats(), rv = r.to_floats();
  double s = 0.0;
  for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(yv[i]) * rv[i];
  return s;
}

// Runs f on a fresh non-recording tape (the forward only) and returns L.
double forward_loss(const std::function<Var(Tape&)>& f, const Tensor& r) {
  Tape tape(false);
  return weighted_sum(f(tape).value(), r);
}

// Runs f recording, seeds dL/dy = r, runs backward. Inputs' gradients are left in their Vars.
void run_backward(const std::function<Var(Tape&)>& f, const Tensor& r) {
  Tape tape;
  Var y = f(tape);
  y.grad().copy_from(r);
  tape.backward();
}

constexpr double kEps = 1e-2;  // float32 forward: large enough that rounding noise stays small

TEST(OpGradients, Linear) {
  Rng rng(1);
  Var x(random_normal({3, 5, 7}, rng)), w(random_normal({6, 7}, rng)), b(random_normal({6}, rng));
  const Tensor r = random_normal({3, 5, 6}, rng);
  auto f = [&](Tape& t) { return ag::linear(t, x, w, b); };
  run_backward(f, r);
  auto loss = [&] { return forward_loss(f, r); };
  expect_gradient_close(loss, x.value(), x.grad().to_floats(), "dx", kEps, 1e-3, 1e-3, 60, rng);
  expect_gradient_close(loss, w.value(), w.grad().to_floats(), "dw", kEps, 1e-3, 1e-3, 60, rng);
  expect_gradient_close(loss, b.value(), b.grad().to_floats(), "db", kEps, 1e-3, 1e-3, 60, rng);
}

TEST(OpGradients, LinearWithoutBiasAccumulates) {
  // A weight used twice must receive both contributions (the tied LM head relies on this).
  Rng rng(2);
  Var x(random_normal({4, 5}, rng)), w(random_normal({3, 5}, rng));
  const Tensor r = random_normal({4, 3}, rng);
  auto f = [&](Tape& t) { return ag::residual(t, ag::linear(t, x, w, Var()), ag::linear(t, x, w, Var())); };
  run_backward(f, r);
  auto loss = [&] { return forward_loss(f, r); };
  expect_gradient_close(loss, w.value(), w.grad().to_floats(), "dw (used twice)", kEps, 1e-3, 1e-3, 15, rng);
  expect_gradient_close(loss, x.value(), x.grad().to_floats(), "dx (used twice)", kEps, 1e-3, 1e-3, 20, rng);
}

TEST(OpGradients, LayerNorm) {
  Rng rng(3);
  Var x(random_normal({2, 3, 13}, rng, 2.0f)), w(random_normal({13}, rng)), b(random_normal({13}, rng));
  const Tensor r = random_normal({2, 3, 13}, rng);
  auto f = [&](Tape& t) { return ag::layernorm(t, x, w, b); };
  run_backward(f, r);
  auto loss = [&] { return forward_loss(f, r); };
  expect_gradient_close(loss, x.value(), x.grad().to_floats(), "dx", 1e-2, 2e-3, 5e-3, 78, rng);
  expect_gradient_close(loss, w.value(), w.grad().to_floats(), "dw", kEps, 1e-3, 1e-3, 13, rng);
  expect_gradient_close(loss, b.value(), b.grad().to_floats(), "db", kEps, 1e-3, 1e-3, 13, rng);
}

TEST(OpGradients, LayerNormForwardNormalises) {
  Rng rng(4);
  const Tensor x = random_normal({5, 33}, rng, 3.0f);
  Tensor w = Tensor::empty({33}, DType::F32), b = Tensor::zeros({33}, DType::F32);
  w.fill_(1.0f);
  Tape tape(false);
  const std::vector<float> y = ag::layernorm(tape, Var(x), Var(w), Var(b)).value().to_floats();
  for (int n = 0; n < 5; ++n) {
    double mean = 0, var = 0;
    for (int c = 0; c < 33; ++c) mean += y[n * 33 + c] / 33.0;
    for (int c = 0; c < 33; ++c) var += (y[n * 33 + c] - mean) * (y[n * 33 + c] - mean) / 33.0;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(var, 1.0, 1e-3);  // eps = 1e-5 shrinks it very slightly
  }
}

TEST(OpGradients, Gelu) {
  Rng rng(5);
  Var x(random_normal({4, 37}, rng, 2.0f));
  const Tensor r = random_normal({4, 37}, rng);
  auto f = [&](Tape& t) { return ag::gelu(t, x); };
  run_backward(f, r);
  expect_gradient_close([&] { return forward_loss(f, r); }, x.value(), x.grad().to_floats(), "dx", 1e-2, 1e-3, 2e-3,
                        148, rng);
}

TEST(OpGradients, GeluMatchesTheFormula) {
  const std::vector<float> xs = {-6.0f, -2.5f, -1.0f, -0.1f, 0.0f, 1e-4f, 0.5f, 1.0f, 3.0f, 10.0f};
  Tape tape(false);
  const std::vector<float> y = ag::gelu(tape, Var(Tensor::from_floats(xs, {10}))).value().to_floats();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    const double ref = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(y[i], ref, 1e-6 + 1e-6 * std::fabs(ref)) << "x = " << x;
  }
}

TEST(OpGradients, Residual) {
  Rng rng(6);
  Var a(random_normal({3, 11}, rng)), b(random_normal({3, 11}, rng));
  const Tensor r = random_normal({3, 11}, rng);
  auto f = [&](Tape& t) { return ag::residual(t, a, b); };
  run_backward(f, r);
  EXPECT_EQ(a.grad().to_floats(), r.to_floats());
  EXPECT_EQ(b.grad().to_floats(), r.to_floats());
}

// The add's backward hands its output's gradient on (functions.cpp, residual_gradient): an input whose gradient
// starts there takes the output's gradient buffer itself, a second such input a copy, and an input that already
// holds a gradient gets it added.
TEST(OpGradients, ResidualHandsItsGradientOn) {
  Rng rng(61);
  Var a(random_normal({3, 11}, rng)), b(random_normal({3, 11}, rng));
  const Tensor r = random_normal({3, 11}, rng);
  Tape tape;
  const Var y = ag::residual(tape, a, b);
  y.grad().copy_from(r);
  EXPECT_TRUE(a.grad_unallocated());
  tape.backward();
  EXPECT_EQ(a.grad().raw(), y.grad().raw()) << "the first input takes the output's gradient buffer";
  EXPECT_NE(b.grad().raw(), y.grad().raw()) << "the second gets its own";
  EXPECT_EQ(a.grad().to_floats(), r.to_floats());
  EXPECT_EQ(b.grad().to_floats(), r.to_floats());
}

TEST(OpGradients, ResidualAddsToGradientsAlreadyThere) {
  Rng rng(62);
  // x feeds two adds; the second add's backward runs first and gives x a gradient, which the first add's must add
  // to: dx = 2r; b's gradient starts at the first add.
  Var x(random_normal({2, 9}, rng)), b(random_normal({2, 9}, rng));
  const Tensor r = random_normal({2, 9}, rng);
  run_backward([&](Tape& t) { return ag::residual(t, ag::residual(t, x, b), x); }, r);
  const std::vector<float> rv = r.to_floats();
  std::vector<float> doubled(rv.size());
  for (size_t i = 0; i < rv.size(); ++i) doubled[i] = rv[i] + rv[i];
  EXPECT_EQ(x.grad().to_floats(), doubled);
  EXPECT_EQ(b.grad().to_floats(), rv);

  // The same input twice: 2r.
  Var z(random_normal({2, 9}, rng));
  run_backward([&](Tape& t) { return ag::residual(t, z, z); }, r);
  EXPECT_EQ(z.grad().to_floats(), doubled);

  // A parameter keeps its own gradient buffer and gets r added; an input without a gradient gets nothing.
  const Tensor w_grad = Tensor::from_floats(std::vector<float>(18, 1.0f), {2, 9});
  const Var w = Var::parameter(random_normal({2, 9}, rng), w_grad);
  const Var constant(random_normal({2, 9}, rng), false);
  run_backward([&](Tape& t) { return ag::residual(t, constant, w); }, r);
  EXPECT_EQ(w.grad().raw(), w_grad.raw());
  for (size_t i = 0; i < rv.size(); ++i) EXPECT_EQ(w.grad().to_floats()[i], 1.0f + rv[i]);
  EXPECT_FALSE(w.grad_unallocated());
}

// The linear layer's backward writes the first gradient of its input over a new buffer (ag::gradient_target) and
// adds the later ones: x feeding two layers gets r @ w1 + r @ w2, x feeding one gets r @ w, as the layer's backward
// adds them into zeros.
TEST(OpGradients, LinearWritesItsInputsFirstGradientOverAndAddsTheRest) {
  Rng rng(63);
  const Tensor w1 = random_normal({5, 7}, rng), w2 = random_normal({5, 7}, rng), r = random_normal({3, 5}, rng);
  const auto expect_gradient = [&](const Var& x, std::initializer_list<Tensor> weights, const char* what) {
    const Tensor expected = Tensor::zeros({3, 7}, DType::F32);
    for (const Tensor& w : weights) ops::linear_backward(expected, Tensor(), Tensor(), r, x.value(), w);
    const std::vector<float> got = x.grad().to_floats(), want = expected.to_floats();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << what << ", element " << i;
  };
  Var x(random_normal({3, 7}, rng));
  const Var v1(w1, false), v2(w2, false);
  run_backward([&](Tape& t) { return ag::residual(t, ag::linear(t, x, v1, Var()), ag::linear(t, x, v2, Var())); }, r);
  expect_gradient(x, {w1, w2}, "x feeding two layers");

  Var single(random_normal({3, 7}, rng));
  run_backward([&](Tape& t) { return ag::linear(t, single, v1, Var()); }, r);
  expect_gradient(single, {w1}, "x feeding one layer");
}

// LayerNorm's backward too: x feeding two LayerNorms gets both backward terms, x feeding one gets its term alone,
// as the op's backward adds them into zeros.
TEST(OpGradients, LayerNormWritesItsInputsFirstGradientOverAndAddsTheRest) {
  Rng rng(64);
  const Tensor w1 = random_normal({7}, rng), w2 = random_normal({7}, rng), b = random_normal({7}, rng);
  const Tensor r = random_normal({3, 7}, rng);
  const auto expect_gradient = [&](const Var& x, std::initializer_list<Tensor> weights, const char* what) {
    const Tensor expected = Tensor::zeros({3, 7}, DType::F32);
    for (const Tensor& w : weights) {
      const Tensor out = Tensor::empty({3, 7}, DType::F32);
      const Tensor mean = Tensor::empty({3}, DType::F32), rstd = Tensor::empty({3}, DType::F32);
      ops::layernorm_forward(out, mean, rstd, x.value(), w, b);
      ops::layernorm_backward(expected, Tensor::zeros({7}, DType::F32), Tensor::zeros({7}, DType::F32), r, x.value(), w,
                              mean, rstd);
    }
    const std::vector<float> got = x.grad().to_floats(), want = expected.to_floats();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << what << ", element " << i;
  };
  Var x(random_normal({3, 7}, rng));
  const Var v1(w1), v2(w2), vb1(b), vb2(b);
  run_backward([&](Tape& t) { return ag::residual(t, ag::layernorm(t, x, v1, vb1), ag::layernorm(t, x, v2, vb2)); }, r);
  expect_gradient(x, {w1, w2}, "x feeding two LayerNorms");

  Var single(random_normal({3, 7}, rng));
  run_backward([&](Tape& t) { return ag::layernorm(t, single, v1, vb1); }, r);
  expect_gradient(single, {w1}, "x feeding one LayerNorm");
}

TEST(OpGradients, Embedding) {
  Rng rng(7);
  Tensor tokens = Tensor::from_ints(std::vector<int32_t>{3, 1, 3, 0, 2, 3}, {2, 3});  // repeated ids
  Var wte(random_normal({5, 6}, rng)), wpe(random_normal({4, 6}, rng));
  const Tensor r = random_normal({2, 3, 6}, rng);
  auto f = [&](Tape& t) { return ag::embedding(t, tokens, wte, wpe); };
  run_backward(f, r);
  auto loss = [&] { return forward_loss(f, r); };
  expect_gradient_close(loss, wte.value(), wte.grad().to_floats(), "dwte", kEps, 1e-3, 1e-3, 30, rng);
  expect_gradient_close(loss, wpe.value(), wpe.grad().to_floats(), "dwpe", kEps, 1e-3, 1e-3, 24, rng);
}

TEST(OpGradients, EmbeddingRejectsOutOfRangeTokens) {
  Rng rng(8);
  Tensor tokens = Tensor::from_ints(std::vector<int32_t>{0, 5}, {1, 2});
  Var wte(random_normal({5, 4}, rng)), wpe(random_normal({4, 4}, rng));
  Tape tape;
  try {
    ag::embedding(tape, tokens, wte, wpe);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("token id 5"), std::string::npos) << e.what();
  }
}

TEST(OpGradients, Attention) {
  Rng rng(9);
  const int n_head = 3;
  Var qkv(random_normal({2, 5, 3 * 12}, rng));
  const Tensor r = random_normal({2, 5, 12}, rng);
  auto f = [&](Tape& t) { return ag::attention(t, qkv, n_head); };
  run_backward(f, r);
  expect_gradient_close([&] { return forward_loss(f, r); }, qkv.value(), qkv.grad().to_floats(), "dqkv", kEps, 2e-3,
                        2e-3, 120, rng);
}

TEST(OpGradients, FlashAttention) {
  // T = 70 crosses a 64-row tile, so the gradient of the online softmax's rescaling across tiles is checked too.
  Rng rng(19);
  const int n_head = 2;
  Var qkv(random_normal({1, 70, 3 * 8}, rng));
  const Tensor r = random_normal({1, 70, 8}, rng);
  auto f = [&](Tape& t) { return ag::flash_attention(t, qkv, n_head, DType::F32); };
  run_backward(f, r);
  expect_gradient_close([&] { return forward_loss(f, r); }, qkv.value(), qkv.grad().to_floats(), "dqkv", kEps, 2e-3,
                        2e-3, 120, rng);
}

TEST(OpGradients, AttentionIsCausal) {
  // Changing a later position's k or v must not change earlier outputs.
  Rng rng(10);
  const int64_t T = 6, C = 8;
  Tensor qkv = random_normal({1, T, 3 * C}, rng);
  Tape tape(false);
  const std::vector<float> before = ag::attention(tape, Var(qkv), 2).value().to_floats();
  float* p = qkv.data<float>();
  for (int64_t c = C; c < 3 * C; ++c) p[(T - 1) * 3 * C + c] += 1.0f;  // k and v of the last position
  const std::vector<float> after = ag::attention(tape, Var(qkv), 2).value().to_floats();
  for (int64_t i = 0; i < (T - 1) * C; ++i) EXPECT_EQ(before[i], after[i]) << i;
  bool last_changed = false;
  for (int64_t i = (T - 1) * C; i < T * C; ++i) last_changed |= before[i] != after[i];
  EXPECT_TRUE(last_changed);
}

TEST(OpGradients, CrossEntropyWithPaddedVocabulary) {
  Rng rng(11);
  const int64_t N = 7, V = 10, Vp = 16;
  Tensor base = random_normal({N, Vp}, rng, 2.0f);
  Tensor targets = test::random_ids({N}, rng, V);
  const float grad_scale = 0.7f;
  // Analytic gradient: the fused classifier overwrites the logits with it.
  Var logits(base.clone());
  Tape tape;
  const std::vector<float> losses = ag::cross_entropy(tape, logits, targets, V, grad_scale).to_floats();
  const std::vector<float> analytic = logits.grad().to_floats();
  // Reference losses in double.
  const std::vector<float> bv = base.to_floats();
  const std::vector<int32_t> tv = targets.to_ints();
  for (int64_t n = 0; n < N; ++n) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(bv[n * Vp + v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(bv[n * Vp + v] - mx);
    EXPECT_NEAR(losses[n], std::log(sum) + mx - bv[n * Vp + tv[n]], 1e-5);
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = V; v < Vp; ++v) EXPECT_EQ(analytic[n * Vp + v], 0.0f) << "padded column must get no gradient";
  auto loss = [&] {
    Tape t(false);
    const std::vector<float> l = ag::cross_entropy(t, Var(base), targets, V, grad_scale).to_floats();
    double s = 0;
    for (float x : l) s += x;
    return grad_scale * s / static_cast<double>(N);
  };
  expect_gradient_close(loss, base, analytic, "dlogits", 1e-2, 1e-4, 2e-3, 70, rng);
}

TEST(OpGradients, CrossEntropyRejectsBadTargets) {
  Rng rng(12);
  Tensor logits = random_normal({2, 8}, rng);
  Tensor targets = Tensor::from_ints(std::vector<int32_t>{1, 6}, {2});
  Tape tape(false);
  EXPECT_THROW(ag::cross_entropy(tape, Var(logits), targets, 6, 1.0f), Error);
}

}  // namespace
}  // namespace lab
