// ag::recompute_in_backward: a value released after its forward readers and computed again just before their
// backward. Its memory is given back at once (the allocator says so), reading it in between is an error, backward
// gives the gradients of the run that kept it, and a tape that does not record is left alone.
#include <gtest/gtest.h>

#include <cmath>

#include "common/autograd/function_support.h"
#include "common/autograd/functions.h"
#include "common/core/memory.h"
#include "tests/common/autograd/layernorm_linear_params.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

int64_t live_activations() {
  return memory_stats(Device::cpu()).live_of(MemCategory::Activations);
}

struct LayerNormLinear : test::LayerNormLinearParams {
  explicit LayerNormLinear(uint64_t seed) : LayerNormLinearParams(seed, {3, 5, 8}, 6) {}
  // linear(layernorm(x)), its LayerNorm output recomputed in backward or kept; the gradients of every input.
  std::vector<std::vector<float>> gradients(bool recompute) const {
    for (const Var* v : {&x, &ln_w, &ln_b, &w, &b}) v->grad().zero_();
    Tape tape;
    const Var n = ag::layernorm(tape, x, ln_w, ln_b);
    const Var y = ag::linear(tape, n, w, b);
    if (recompute) {
      ag::recompute_layernorm_in_backward(tape, n, x, ln_w, ln_b);
      // The released bytes are written over, so that only the recompute can give the value back.
      Tensor::empty(n.value().shape(), DType::F32).fill_(std::nanf(""));
    }
    y.grad().fill_(1.0f);
    tape.backward();
    std::vector<std::vector<float>> out;
    for (const Var* v : {&x, &ln_w, &ln_b, &w, &b}) out.push_back(v->grad().to_floats());
    return out;
  }
};

TEST(RecomputeInBackward, TheLayerNormsOutputIsReleasedAndTheGradientsAreBitwiseThoseOfKeepingIt) {
  const LayerNormLinear net(1);
  EXPECT_EQ(net.gradients(true), net.gradients(false));
}

TEST(RecomputeInBackward, TheMemoryIsGivenBackAtOnceAndReadingItBeforeBackwardIsAnError) {
  const LayerNormLinear net(2);
  Tape tape;
  const Var n = ag::layernorm(tape, net.x, net.ln_w, net.ln_b);
  const Var y = ag::linear(tape, n, net.w, net.b);
  const int64_t before = live_activations();
  ag::recompute_layernorm_in_backward(tape, n, net.x, net.ln_w, net.ln_b);
  EXPECT_EQ(before - live_activations(), static_cast<int64_t>(n.value().nbytes()));
  EXPECT_TRUE(n.value().storage()->released());
  testing::expect_error([&] { (void)n.value().to_floats(); }, ErrorKind::Internal, {"recompute"});
  int64_t tape_keeps = 0;  // a released value is not counted as kept
  for (const TapeEntry& e : tape.entries()) tape_keeps += e.kept_bytes;
  // LayerNorm's two statistics (15 rows; x was made outside a forward pass, so it is not activation memory); the
  // linear's input, the released value, is not counted.
  EXPECT_EQ(tape_keeps, static_cast<int64_t>(2 * 15 * sizeof(float)));
  y.grad().fill_(1.0f);
  tape.backward();
  EXPECT_FALSE(n.value().storage()->released());
}

TEST(RecomputeInBackward, ATapeThatDoesNotRecordIsLeftAlone) {
  const LayerNormLinear net(3);
  Tape tape(false);
  const Var n = ag::layernorm(tape, net.x, net.ln_w, net.ln_b);
  const std::vector<float> value = n.value().to_floats();
  ag::recompute_layernorm_in_backward(tape, n, net.x, net.ln_w, net.ln_b);
  EXPECT_FALSE(n.value().storage()->released());
  EXPECT_EQ(n.value().to_floats(), value);
  EXPECT_EQ(tape.size(), 0u);
}

TEST(RecomputeInBackward, TheRecomputeRunsJustBeforeTheReadersBackward) {
  // Steps recorded before the value's readers run after the recompute; the reader's backward sees the value again.
  Rng rng(4);
  const Var x(test::random_normal({4, 4}, rng));
  const Tensor value = Tensor::empty({4}, DType::F32);
  value.fill_(3.0f);
  std::vector<std::string> order;
  Tape tape;
  tape.record("before", {}, [&] { order.push_back("before"); });
  tape.record("reader", {value},
              [&] { order.push_back(value.to_floats() == std::vector<float>(4, 3.0f) ? "read 3" : "wrong"); });
  ag::recompute_in_backward(tape, "fill", value, [&] {
    order.push_back("recompute");
    value.fill_(3.0f);
  });
  EXPECT_TRUE(value.storage()->released());
  tape.backward();
  EXPECT_EQ(order, (std::vector<std::string>{"recompute", "read 3", "before"}));
}

}  // namespace
}  // namespace lab
