#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace lab::test {

GPT2Config tiny_gpt2_config(int64_t vocab, int64_t layers, int64_t heads, int64_t width, int64_t block) {
  GPT2Config c;
  c.n_layer = static_cast<int>(layers);
  c.n_head = static_cast<int>(heads);
  c.n_embd = static_cast<int>(width);
  c.block_size = static_cast<int>(block);
  c.vocab_size = static_cast<int>(vocab);
  c.padded_vocab_size = static_cast<int>(GPT2Config::pad_vocab(vocab));
  c.validate();
  return c;
}

Tensor random_normal(const Shape& shape, Rng& rng, float std) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (float& x : v) x = rng.normal(0.0f, std);
  return Tensor::from_floats(v, shape);
}

Tensor random_ids(const Shape& shape, Rng& rng, int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(shape_numel(shape)));
  for (int32_t& x : v) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(n)));
  return Tensor::from_ints(v, shape);
}

double max_scaled_error(const std::vector<float>& a, const std::vector<float>& b, double floor) {
  EXPECT_EQ(a.size(), b.size());
  double scale = floor, err = 0.0;
  for (size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
  }
  return err / scale;
}

double max_abs_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
  }
  return err;
}

double numeric_derivative(const std::function<double()>& loss, const Tensor& x, int64_t i, double eps) {
  float* p = x.data<float>() + i;
  const float saved = *p;
  *p = static_cast<float>(saved + eps);
  const double up = loss();
  *p = static_cast<float>(saved - eps);
  const double down = loss();
  *p = saved;
  return (up - down) / (2.0 * eps);
}

void expect_gradient_close(const std::function<double()>& loss, const Tensor& x, const std::vector<float>& analytic,
                           const std::string& what, double eps, double atol, double rtol, int samples, Rng& rng) {
  ASSERT_EQ(static_cast<int64_t>(analytic.size()), x.numel()) << what;
  double worst_excess = -INFINITY;
  int64_t worst_i = -1;
  double worst_num = 0, worst_ana = 0;
  const int64_t n = x.numel();
  for (int s = 0; s < samples && s < n; ++s) {
    const int64_t i = n <= samples ? s : static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
    const double num = numeric_derivative(loss, x, i, eps);
    const double ana = analytic[static_cast<size_t>(i)];
    const double excess = std::fabs(num - ana) - (atol + rtol * std::fabs(num));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst_i = i;
      worst_num = num;
      worst_ana = ana;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst_i << " analytic " << worst_ana << " numeric "
                               << worst_num;
}

}  // namespace lab::test
