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

// d gelu(x) / dx of the tanh approximation, in double and in float.
template <typename Real>
Real gelu_derivative(Real x) {
  const Real s = Real(0.7978845608028654), c = Real(0.044715);
  const Real t = std::tanh(s * (x + c * x * x * x));
  return Real(0.5) * (1 + t) + Real(0.5) * x * (1 - t * t) * s * (1 + 3 * c * x * x);
}

// cuBLASLt's GELU is not the tanh formula to the last bit (matmul_lab.cpp: up to 3.7e-6 of the output's scale on an
// H100, a tanh some 2e-6 off), and neither is the emulation build's. GELU's derivative moves up to about 20 times as
// far as its tanh for |x| up to 5 (d gelu' / d tanh = 0.5 - x s (1 + 3c x^2) tanh), so the GELU backward
// epilogue's output is allowed 4e-5 of its scale on top of the product's rounding.
constexpr double kGeluGradEpilogueAllowance = 4e-5;

// `actual` against the exact values: within the f32 tolerance of a sum of `length` terms, or for 16-bit dtypes by
// the low-precision rule against `plain` (the straightforward computation, rounded once to `dtype`).
// `allowance`: more error allowed in f32, relative to the output's scale.
void expect_matches(const char* what, const std::string& name, Device device, DType dtype, int64_t length,
                    const Tensor& actual, std::vector<float>& exact, std::vector<float>& plain, const Shape& shape,
                    double allowance = 0.0) {
  const Tensor exact_t = Tensor::from_floats(exact, shape);
  if (dtype == DType::F32) {
    Tolerance tol = tolerance_for(DType::F32, length);
    tol.abs += allowance;
    const CloseReport r = compare_close(actual.reshape(shape), exact_t, tol);
    EXPECT_TRUE(r.ok()) << name << " on " << device.str() << ": " << r.describe(what);
  } else {
    const Tensor baseline = host_tensor(plain, shape, dtype);
    const ErrorRatioReport r = compare_error_to_baseline(actual.reshape(shape), baseline, exact_t, dtype);
    EXPECT_TRUE(r.ok()) << name << " on " << device.str() << ": " << r.describe(what);
  }
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
          {{9, 31}, 33, DType::BF16, false, false},  {{130, 24}, 40, DType::BF16, true, false},
          {{3, 5, 40}, 72, DType::F16, true, true},  {{300, 17}, 24, DType::F16, false, false}};
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
  expect_matches("out", c.name(), device, c.dtype, C, out, out_exact, out_plain, shape2);
  if (pre.defined()) expect_matches("pre_gelu", c.name(), device, c.dtype, C, pre, pre_exact, pre_plain, shape2);
}

void check_gelu_grad_case(const MatmulOpCase& c, Device device, uint64_t seed) {
  Rng rng(seed);
  const int64_t K = c.inp_shape.back(), N = c.out_features, rows = shape_numel(c.inp_shape) / K;
  std::vector<float> a = random_values(rows * K, rng, 1.0f);
  std::vector<float> b = random_values(K * N, rng, 1.0f / std::sqrt(static_cast<float>(K)));
  std::vector<float> pre = random_values(rows * N, rng, 2.0f);  // GELU's inputs, negative ones included
  const Tensor a_t = host_tensor(a, {rows, K}, c.dtype).to(device);
  const Tensor b_t = host_tensor(b, {K, N}, c.dtype).to(device);
  const Tensor pre_host = host_tensor(pre, {rows, N}, c.dtype);
  const Tensor pre_t = pre_host.to(device);
  std::vector<float> exact, plain;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0.0;
      float sum_f = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float x = a[static_cast<size_t>(i * K + k)], y = b[static_cast<size_t>(k * N + j)];
        sum += static_cast<double>(x) * y;
        sum_f += x * y;
      }
      const float p = pre[static_cast<size_t>(i * N + j)];
      exact.push_back(static_cast<float>(sum * gelu_derivative<double>(p)));
      plain.push_back(sum_f * gelu_derivative<float>(p));
    }
  std::vector<float> b_transposed_values(b.size());  // b's rounded values, stored [N, K]
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      b_transposed_values[static_cast<size_t>(j * K + k)] = b[static_cast<size_t>(k * N + j)];
  for (const bool b_transposed : {false, true}) {
    const Tensor b_arg =
        b_transposed ? Tensor::from_floats(b_transposed_values, {N, K}).to_dtype(c.dtype).to(device) : b_t;
    const Tensor out = Tensor::zeros({rows, N}, c.dtype, device);
    if (c.dtype == DType::F32) out.fill_(std::nanf(""));  // an element left unwritten fails
    ch06::matmul_epilogue(out, pre_t, a_t, b_arg, b_transposed, Tensor(), ch06::Epilogue::GeluGrad);
    const std::string name = cat(c.name(), b_transposed ? " dgelu, b transposed" : " dgelu");
    expect_matches("out", name, device, c.dtype, K, out, exact, plain, {rows, N},
                   device.is_cuda() ? kGeluGradEpilogueAllowance : 0.0);
    EXPECT_EQ(pre_t.to(Device::cpu()).to_floats(), pre_host.to_floats()) << name << ": pre_gelu was written";
  }
}

}  // namespace lab::test
