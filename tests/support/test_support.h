// Helpers shared by the test suites: random tensors, error measures, and finite-difference gradients.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/nn/config.h"
#include "common/util/rng.h"

namespace lab::test {

// A CPU f32 tensor of N(0, std) values.
Tensor random_normal(const Shape& shape, Rng& rng, float std = 1.0f);
// A CPU i32 tensor of uniform ids in [0, n).
Tensor random_ids(const Shape& shape, Rng& rng, int64_t n);

// A small GPT-2 for tests: `layers` blocks of `heads` heads, `width` wide, a context of `block` tokens and a
// vocabulary of `vocab` ids padded as the model pads it (to a multiple of 128). Tests pick shapes off the
// kernels' block sizes, or vocabularies whose padding shows, by choosing these.
GPT2Config tiny_gpt2_config(int64_t vocab, int64_t layers = 2, int64_t heads = 2, int64_t width = 64,
                            int64_t block = 64);

// max_i |a_i - b_i| / max(max_i |b_i|, floor): an error relative to the reference's scale.
double max_scaled_error(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-6);
// max_i |a_i - b_i|
double max_abs_error(const std::vector<float>& a, const std::vector<float>& b);

// Central finite difference of `loss` with respect to element i of the CPU f32 tensor `x`
// (the element is perturbed in place and restored). `loss` must only read x.
double numeric_derivative(const std::function<double()>& loss, const Tensor& x, int64_t i, double eps);

// Checks `analytic` (the gradient of loss w.r.t. x) at up to `samples` random elements of x:
// |analytic - numeric| <= atol + rtol * |numeric|. Reports the worst element on failure.
void expect_gradient_close(const std::function<double()>& loss, const Tensor& x, const std::vector<float>& analytic,
                           const std::string& what, double eps, double atol, double rtol, int samples, Rng& rng);

}  // namespace lab::test
