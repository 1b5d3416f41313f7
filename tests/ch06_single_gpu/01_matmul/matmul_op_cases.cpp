#include "tests/ch06_single_gpu/01_matmul/matmul_op_cases.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "common/lab/compare.h"
#include "common/util/rng.h"

namespace lab::test {

namespace {

double gelu_f64(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

float gelu_f32(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}

std::vector<float> random_values(int64_t n, Rng& rng, float std) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = rng.normal(0.0f, std);
  return v;
}

// Host values as a tensor of `dtype` on the CPU; `values` are rounded to that dtype in place, so that the
// references below start from the numbers the op really gets.
Tensor host_tensor(std::vector<float>& values, const Shape& shape, DType dtype) {
  Tensor t = Tensor::from_floats(values, shape);
  if (dtype == DType::F32) return t;
  t = t.to_dtype(dtype);
  values = t.to_floats();
  return t;
}

}  // namespace

std::string MatmulOpCase::name() const {
  std::string s = "inp";
  for (const int64_t d : inp_shape) s += cat("_", d);
  return cat(s, "_oc", out_features, "_", dtype_name(dtype), bias ? "" : "_nobias", pre_gelu ? "" : "_nopre");
}

std::vector<MatmulOpCase> matmul_op_cases() {
  return {{{1, 1}, 1, DType::F32, true, true},       {{3, 5, 7}, 9, DType::F32, true, true},
          {{33, 65}, 130, DType::F32, false, true},  {{17, 64}, 96, DType::F32, true, false},
          {{1100, 40}, 200, DType::F32, true, true}, {{2, 8, 48}, 192, DType::BF16, true, true},
          {{9, 31}, 33, DType::BF16, false, false},  {{130, 24}, 40, DType::BF16, true, false}};
}

void check_matmul_op_case(const MatmulOpCase& c, Device device, uint64_t seed) {
  Rng rng(seed);
  const int64_t C = c.inp_shape.back(), OC = c.out_features, rows = shape_numel(c.inp_shape) / C;
  std::vector<float> x = random_values(rows * C, rng, 1.0f);
  std::vector<float> w = random_values(OC * C, rng, 1.0f / std::sqrt(static_cast<float>(C)));
  std::vector<float> b = c.bias ? random_values(OC, rng, 0.5f) : std::vector<float>(static_cast<size_t>(OC), 0.0f);
  const Tensor inp = host_tensor(x, c.inp_shape, c.dtype).to(device);
  const Tensor weight = host_tensor(w, {OC, C}, c.dtype).to(device);
  const Tensor bias = c.bias ? host_tensor(b, {OC}, c.dtype).to(device) : Tensor();
  Shape out_shape = c.inp_shape;
  out_shape.back() = OC;
  const Tensor out = Tensor::zeros(out_shape, c.dtype, device);
  const Tensor pre = c.pre_gelu ? Tensor::zeros(out_shape, c.dtype, device) : Tensor();
  if (c.dtype == DType::F32) {  // poisoned (fill_ is f32 only): an element left unwritten fails
    out.fill_(std::nanf(""));
    if (pre.defined()) pre.fill_(std::nanf(""));
  }
  ch06::matmul_bias_gelu(out, pre, inp, weight, bias);

  // References: exact (fp64), and for bf16 the straightforward computation (fp32 sums, rounded once).
  std::vector<float> pre_exact, out_exact, pre_plain, out_plain;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < OC; ++o) {
      double exact = b[static_cast<size_t>(o)];
      float plain = 0.0f;
      for (int64_t k = 0; k < C; ++k) {
        const float xi = x[static_cast<size_t>(i * C + k)], wi = w[static_cast<size_t>(o * C + k)];
        exact += static_cast<double>(xi) * wi;
        plain += xi * wi;
      }
      plain += b[static_cast<size_t>(o)];
      pre_exact.push_back(static_cast<float>(exact));
      out_exact.push_back(static_cast<float>(gelu_f64(exact)));
      pre_plain.push_back(plain);
      out_plain.push_back(gelu_f32(plain));
    }
  const Shape shape2 = {rows, OC};
  const auto check = [&](const char* what, const Tensor& actual, std::vector<float>& exact, std::vector<float>& plain) {
    const Tensor exact_t = Tensor::from_floats(exact, shape2);
    if (c.dtype == DType::F32) {
      const CloseReport r = compare_close(actual.reshape(shape2), exact_t, tolerance_for(DType::F32, C));
      EXPECT_TRUE(r.ok()) << c.name() << " on " << device.str() << ": " << r.describe(what);
    } else {
      const Tensor baseline = host_tensor(plain, shape2, c.dtype);
      const ErrorRatioReport r = compare_error_to_baseline(actual.reshape(shape2), baseline, exact_t, c.dtype);
      EXPECT_TRUE(r.ok()) << c.name() << " on " << device.str() << ": " << r.describe(what);
    }
  };
  check("out", out, out_exact, out_plain);
  if (pre.defined()) check("pre_gelu", pre, pre_exact, pre_plain);
}

}  // namespace lab::test
