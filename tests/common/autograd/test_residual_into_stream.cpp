// ag::residual_into_stream, the residual add of a pre-LN block: the branch's gradient is the stream's own buffer
// instead of a copy, and every gradient is bitwise what ag::residual gives, because the stream's other reader (the
// LayerNorm at the start of the branch) adds into that buffer only after the branch's backward has read it.
#include <gtest/gtest.h>

#include <functional>

#include "common/autograd/functions.h"
#include "tests/common/autograd/layernorm_linear_params.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

struct PreLnBlock : test::LayerNormLinearParams {
  explicit PreLnBlock(uint64_t seed) : LayerNormLinearParams(seed, {2, 7, 8}, 8) {}
  using Add = std::function<Var(Tape&, const Var&, const Var&)>;
  // y = add(x, linear(layernorm(x))); backward from ones. Returns every gradient, and whether the branch's
  // gradient was the stream's buffer.
  std::vector<std::vector<float>> gradients(const Add& add, bool* shared) const {
    for (const Var* v : {&x, &ln_w, &ln_b, &w, &b}) v->grad().zero_();
    const Var stream(x.value().clone());  // a fresh input whose gradient starts at the add, as a block's does
    Tape tape;
    const Var branch = ag::linear(tape, ag::layernorm(tape, stream, ln_w, ln_b), w, b);
    const Var y = add(tape, stream, branch);
    y.grad().fill_(1.0f);
    tape.backward();
    *shared = branch.grad().storage() == stream.grad().storage();
    std::vector<std::vector<float>> out{stream.grad().to_floats()};
    for (const Var* v : {&ln_w, &ln_b, &w, &b}) out.push_back(v->grad().to_floats());
    return out;
  }
};

TEST(ResidualIntoStream, TheBranchTakesTheStreamsBufferAndTheGradientsAreBitwiseThoseOfACopy) {
  const PreLnBlock block(3);
  bool copy_shared = true, stream_shared = false;
  const auto with_copy =
      block.gradients([](Tape& t, const Var& a, const Var& b) { return ag::residual(t, a, b); }, &copy_shared);
  const auto shared = block.gradients(
      [](Tape& t, const Var& a, const Var& b) { return ag::residual_into_stream(t, a, b); }, &stream_shared);
  EXPECT_FALSE(copy_shared);
  EXPECT_TRUE(stream_shared);
  EXPECT_EQ(shared, with_copy);
}

}  // namespace
}  // namespace lab
