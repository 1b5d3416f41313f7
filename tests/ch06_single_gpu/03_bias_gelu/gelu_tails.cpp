#include "tests/ch06_single_gpu/03_bias_gelu/gelu_tails.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace lab::test {

void expect_gelu_matches_double(
    Device device, int64_t columns, const std::function<void(const Tensor&, const Tensor&, const Tensor&)>& forward,
    const std::function<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>& backward) {
  std::vector<float> xs;
  for (int i = -4500; i <= 4500; ++i) xs.push_back(static_cast<float>(i) / 500.0f);
  const int64_t count = static_cast<int64_t>(xs.size());
  const int64_t rows = (count + columns - 1) / columns;
  xs.resize(static_cast<size_t>(rows * columns), 0.0f);
  const Shape shape{rows, columns};
  const Tensor x = Tensor::from_floats(xs, shape).to(device);
  const Tensor bias = Tensor::zeros({columns}, DType::F32, device);
  const Tensor ones = Tensor::from_floats(std::vector<float>(xs.size(), 1.0f), shape).to(device);
  const Tensor out = Tensor::zeros(shape, DType::F32, device), dx = Tensor::zeros(shape, DType::F32, device);
  forward(out, x, bias);
  backward(dx, x, bias, ones);
  const std::vector<float> y = out.to_floats(), g = dx.to_floats();
  int64_t bad = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double v = xs[static_cast<size_t>(i)], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    const double s = 1.0 / (1.0 + std::exp(-2.0 * u));
    const double value = v * s, slope = s + 2.0 * v * s * (1.0 - s) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * v * v);
    const double rel = 8.0 * 0x1p-23 * (1.0 + std::fabs(2.0 * u));
    const size_t k = static_cast<size_t>(i);
    if (!(std::fabs(y[k] - value) <= rel * std::fabs(value)) && ++bad <= 5)
      ADD_FAILURE() << device.str() << ": gelu(" << v << ") = " << y[k] << ", expected " << value;
    if (!(std::fabs(g[k] - slope) <= rel * std::fabs(slope) + 8.0 * 0x1p-23) && ++bad <= 5)
      ADD_FAILURE() << device.str() << ": gelu'(" << v << ") = " << g[k] << ", expected " << slope;
  }
  EXPECT_EQ(bad, 0) << device.str();
}

}  // namespace lab::test
