// A Var's value and its gradient live apart: a handle made by without_value() shares the gradient (and its hook
// and pending steps) but does not keep the value alive, and the tape and the backward steps hold such handles
// where their backward does not read the value. So an activation no backward reads (a linear layer's output that
// a residual add consumes) is freed once the forward pass is done with it, and backward still gives its inputs
// the same gradients.
#include <gtest/gtest.h>

#include <memory>

#include "common/autograd/functions.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

std::weak_ptr<Storage> watch(const Var& v) {
  return v.value().storage();
}

TEST(VarValues, AHandleWithoutTheValueSharesTheGradientAndRefusesTheValue) {
  Rng rng(1);
  const Var x(test::random_normal({2, 3}, rng));
  const Var handle = x.without_value();
  EXPECT_TRUE(handle == x);
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_TRUE(handle.grad_unallocated());
  handle.grad().fill_(2.0f);  // allocated through the handle, of the value's shape
  EXPECT_FALSE(x.grad_unallocated());
  EXPECT_EQ(x.grad().shape(), x.value().shape());
  EXPECT_EQ(x.grad().to_floats(), std::vector<float>(6, 2.0f));
  testing::expect_error([&] { (void)handle.value(); }, ErrorKind::InvalidArgument, {"holds its gradient only"});
}

TEST(VarValues, TheValueIsFreedWithItsLastHandleThatKeepsIt) {
  Rng rng(2);
  std::weak_ptr<Storage> value;
  Var handle;
  {
    const Var x(test::random_normal({4, 4}, rng));
    value = watch(x);
    handle = x.without_value();
    EXPECT_FALSE(value.expired());
  }
  EXPECT_TRUE(value.expired());
  // The gradient side lives on: a new gradient of the value's shape, dtype and device.
  const Tensor g = handle.bind_new_grad(MemCategory::Activations);
  EXPECT_EQ(g.shape(), (Shape{4, 4}));
  EXPECT_EQ(g.dtype(), DType::F32);
}

TEST(VarValues, AParametersHandleKeepsItsValueAndSeesItRebound) {
  Rng rng(3);
  const Var w = Var::parameter(test::random_normal({3, 2}, rng), Tensor::zeros({3, 2}, DType::F32));
  const Var handle = w.without_value();
  const Tensor other = test::random_normal({3, 2}, rng);
  w.bind_value(other);
  EXPECT_EQ(handle.value().data<float>(), other.data<float>());
  testing::expect_error(
      [&] {
        w.bind_value(Tensor::zeros({2, 3}, DType::F32));
      },
      ErrorKind::InvalidArgument, {"bind_value: shape"});
}

TEST(VarValues, TheTapeKeepsNoValueAlive) {
  Rng rng(4);
  Tape tape;
  std::weak_ptr<Storage> value;
  int hooks = 0;
  Var handle;
  {
    const Var x(test::random_normal({2, 2}, rng));
    value = watch(x);
    handle = x.without_value();
    x.set_gradient_hook([&] { ++hooks; });
    tape.record("adds to x", {}, [handle] { handle.grad().fill_(1.0f); }, {x});
  }
  EXPECT_TRUE(value.expired());
  EXPECT_EQ(handle.pending_gradient_steps(), 1);
  tape.backward();
  EXPECT_EQ(hooks, 1);
  EXPECT_EQ(handle.grad().to_floats(), std::vector<float>(4, 1.0f));
}

TEST(VarValues, ALinearOutputThatAResidualAddConsumesIsFreedAndTheGradientsAreUnchanged) {
  Rng rng(5);
  const Var w = Var::parameter(test::random_normal({3, 3}, rng), Tensor::zeros({3, 3}, DType::F32));
  const Var b = Var::parameter(test::random_normal({3}, rng), Tensor::zeros({3}, DType::F32));
  const Var x(test::random_normal({2, 3}, rng));
  Tape tape;
  std::weak_ptr<Storage> projection, sum;
  Var y;
  {
    const Var p = ag::linear(tape, x, w, b);
    projection = watch(p);
    y = ag::residual(tape, x, p);
    sum = watch(y);
  }
  EXPECT_TRUE(projection.expired());  // neither the linear's backward nor the add's reads it
  EXPECT_FALSE(sum.expired());        // the caller holds it
  y.grad().fill_(1.0f);
  tape.backward();
  // y = x + x W^T + b with dy = 1: dx = 1 + (column sums of W), dW[o][i] = sum over rows of x[:, i], db = rows.
  const std::vector<float> wv = w.value().to_floats(), xv = x.value().to_floats();
  const std::vector<float> dx = x.grad().to_floats(), dw = w.grad().to_floats(), db = b.grad().to_floats();
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(dx[r * 3 + i], 1.0f + wv[0 * 3 + i] + wv[1 * 3 + i] + wv[2 * 3 + i], 1e-5f);
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(dw[o * 3 + i], xv[i] + xv[3 + i], 1e-5f);
    EXPECT_FLOAT_EQ(db[o], 2.0f);
  }
}

}  // namespace
}  // namespace lab
