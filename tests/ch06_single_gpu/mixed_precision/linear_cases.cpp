// Random Linear problems, the textbook references and the 16-bit Linear under test (see linear_cases.h).
#include "tests/ch06_single_gpu/mixed_precision/linear_cases.h"

#include <vector>

#include "common/autograd/tape.h"
#include "common/nn/low_precision_linear.h"
#include "common/ops/convert.h"
#include "tests/support/test_support.h"

namespace lab::test {

LinearCase random_linear_case(int64_t N, int64_t C, int64_t OC, Rng& rng) {
  return {random_normal({N, C}, rng), random_normal({OC, C}, rng, 0.1f), random_normal({OC}, rng),
          random_normal({N, OC}, rng)};
}

namespace {

// The values as a product with `dtype` inputs reads them.
std::vector<float> as_read(const Tensor& t, DType dtype) {
  return dtype == DType::F32 ? t.to_floats() : t.to_dtype(dtype).to_floats();
}

}  // namespace

LinearResult reference_linear(const LinearCase& c, DType dtype, bool exact) {
  const int64_t N = c.x.dim(0), C = c.x.dim(1), OC = c.weight.dim(0);
  const std::vector<float> x = as_read(c.x, dtype), w = as_read(c.weight, dtype), d = as_read(c.dout, dtype);
  const std::vector<float> b = c.bias.to_floats(), d32 = c.dout.to_floats();
  std::vector<float> out(N * OC), dx(N * C), dw(OC * C), db(OC);
  // Sums in double (exact) or float, in index order.
  const auto dot = [&](auto term, int64_t n) {
    double sd = 0;
    float sf = 0;
    for (int64_t k = 0; k < n; ++k) {
      sd += static_cast<double>(term(k));
      sf += term(k);
    }
    return exact ? static_cast<float>(sd) : sf;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < OC; ++j)
      out[n * OC + j] = b[j] + dot([&](int64_t k) { return x[n * C + k] * w[j * C + k]; }, C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < C; ++k) dx[n * C + k] = dot([&](int64_t j) { return d[n * OC + j] * w[j * C + k]; }, OC);
  for (int64_t j = 0; j < OC; ++j)
    for (int64_t k = 0; k < C; ++k) dw[j * C + k] = dot([&](int64_t n) { return d[n * OC + j] * x[n * C + k]; }, N);
  for (int64_t j = 0; j < OC; ++j) db[j] = dot([&](int64_t n) { return d32[n * OC + j]; }, N);
  return {Tensor::from_floats(out, {N, OC}), Tensor::from_floats(dx, {N, C}), Tensor::from_floats(dw, {OC, C}),
          Tensor::from_floats(db, {OC})};
}

LinearResult low_precision_linear_on(const LinearCase& c, DType dtype, Device device) {
  const Var x(c.x.to(device));
  const Var weight = Var::parameter(c.weight.to(device), Tensor::zeros(c.weight.shape(), DType::F32, device));
  const Var bias = Var::parameter(c.bias.to(device), Tensor::zeros(c.bias.shape(), DType::F32, device));
  const Tensor weight_16bit = Tensor::empty(c.weight.shape(), dtype, device);
  ops::convert(weight_16bit, weight.value());
  Tape tape;
  const Var out = low_precision_linear(tape, x, weight, weight_16bit, bias);
  out.grad().copy_from(c.dout.to(device));
  tape.backward();
  return {out.value().to(Device::cpu()), x.grad().to(Device::cpu()), weight.grad().to(Device::cpu()),
          bias.grad().to(Device::cpu())};
}

}  // namespace lab::test
