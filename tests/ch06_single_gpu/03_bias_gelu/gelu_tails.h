// GELU over its whole range against double precision, for any version of the bias + GELU lab: in the negative
// tail gelu(x) is tiny (-1e-28 at x = -9) and the tanh form 0.5 x (1 + tanh(u)) loses every digit there, since
// 1 + tanh(u) cancels; the sigmoid form of common/ops/gelu.h keeps a relative error of a few eps. The bound is
// exp's condition: an input rounded by eps gives exp(-2u) a relative error of |2u| eps.
#pragma once

#include <functional>

#include "common/core/tensor.h"

namespace lab::test {

// x = -9 ... 9 in steps of 1/500 as one row of `columns`-wide rows (padded with zeros), bias zero, dout one.
// `forward(out, x, bias)` must leave gelu(x + bias) in out; `backward(dx, x, bias, dout)` gelu'(x + bias) * dout
// in dx. Every element is checked against the double-precision value.
void expect_gelu_matches_double(
    Device device, int64_t columns, const std::function<void(const Tensor&, const Tensor&, const Tensor&)>& forward,
    const std::function<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>& backward);

}  // namespace lab::test
