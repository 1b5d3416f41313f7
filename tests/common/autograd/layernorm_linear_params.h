// The inputs of linear(layernorm(x)) on the CPU, drawn from a seed: what the autograd tests of a LayerNorm feeding
// a linear layer (recompute, the residual add of a pre-LN block) run on.
#pragma once

#include "common/autograd/var.h"
#include "tests/support/test_support.h"

namespace lab::test {

struct LayerNormLinearParams {
  Var x, ln_w, ln_b, w, b;  // x [rows..., C]; LayerNorm weight and bias [C]; linear weight [out, C] and bias [out]
  LayerNormLinearParams(uint64_t seed, const Shape& x_shape, int64_t out) {
    Rng rng(seed);
    const int64_t C = x_shape.back();
    x = Var(random_normal(x_shape, rng));
    ln_w = Var(random_normal({C}, rng));
    ln_b = Var(random_normal({C}, rng));
    w = Var(random_normal({out, C}, rng));
    b = Var(random_normal({out}, rng));
  }
};

}  // namespace lab::test
