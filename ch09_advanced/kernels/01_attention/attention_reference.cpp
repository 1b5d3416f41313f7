#include "ch09_advanced/kernels/01_attention/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/error.h"

namespace lab::ch09 {

namespace {

struct Layout {
  int64_t B, T, C, NH, HS;
  double scale;
  DType rounding;
  // v as the 16-bit products read it (F32: exact, unrounded).
  double rounded(double v) const {
    switch (rounding) {
      case DType::BF16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
      case DType::F16: return f16_bits_to_float(float_to_f16_bits(static_cast<float>(v)));
      default: return v;
    }
  }
  // Element j of q (part 0), k (1) or v (2) of head h at position t of batch row b, inside qkv.
  size_t qkv_at(int64_t b, int64_t t, int part, int64_t h) const {
    return static_cast<size_t>(((b * T + t) * 3 + part) * C + h * HS);
  }
  size_t out_at(int64_t b, int64_t t, int64_t h) const { return static_cast<size_t>((b * T + t) * C + h * HS); }
};

Layout layout_of(const AttentionShape& s, DType rounding) {
  LAB_CHECK(rounding == DType::F32 || rounding == DType::BF16 || rounding == DType::F16, InvalidArgument,
            "attention reference: rounding to ", dtype_name(rounding), " (f32 = none, bf16, f16)");
  return {s.B, s.T, s.C(), s.NH, s.HS, 1.0 / std::sqrt(static_cast<double>(s.HS)), rounding};
}

// Values rounded to `l.rounding` (f32 for F32), as an f32 tensor.
Tensor rounded_tensor(const Layout& l, const std::vector<double>& values, const Shape& shape) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(l.rounded(values[i]));
  return Tensor::from_floats(out, shape);
}

double dot(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(a[j]) * static_cast<double>(b[j]);
  return sum;
}

// p_s of row t (s <= t) into p, and the row's log-sum-exp.
double row_probabilities(const Layout& l, const std::vector<float>& x, int64_t b, int64_t h, int64_t t,
                         std::vector<double>& p) {
  const float* q = x.data() + l.qkv_at(b, t, 0, h);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s <= t; ++s) {
    p[static_cast<size_t>(s)] = l.scale * dot(q, x.data() + l.qkv_at(b, s, 1, h), l.HS);
    mx = std::max(mx, p[static_cast<size_t>(s)]);
  }
  double sum = 0;
  for (int64_t s = 0; s <= t; ++s) sum += std::exp(p[static_cast<size_t>(s)] - mx);
  const double lse = mx + std::log(sum);
  for (int64_t s = 0; s <= t; ++s) p[static_cast<size_t>(s)] = std::exp(p[static_cast<size_t>(s)] - lse);
  return lse;
}

void check_shape(const AttentionShape& s, const Tensor& qkv) {
  qkv.check_shape({s.B, s.T, 3 * s.C()}, "attention reference qkv");
}

}  // namespace

ReferenceForward reference_forward(const AttentionShape& shape, const Tensor& qkv, DType rounding) {
  check_shape(shape, qkv);
  const Layout l = layout_of(shape, rounding);
  const std::vector<float> x = qkv.to_floats();
  std::vector<double> out(static_cast<size_t>(l.B * l.T * l.C));
  std::vector<float> lse(static_cast<size_t>(l.B * l.NH * l.T));
#pragma omp parallel
  {
    std::vector<double> p(static_cast<size_t>(l.T)), o(static_cast<size_t>(l.HS));
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < l.B * l.NH; ++bh) {
      const int64_t b = bh / l.NH, h = bh % l.NH;
      for (int64_t t = 0; t < l.T; ++t) {
        lse[static_cast<size_t>(bh * l.T + t)] = static_cast<float>(row_probabilities(l, x, b, h, t, p));
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t s = 0; s <= t; ++s) {
          const float* v = x.data() + l.qkv_at(b, s, 2, h);
          const double ps = l.rounded(p[static_cast<size_t>(s)]);
          for (int64_t j = 0; j < l.HS; ++j) o[static_cast<size_t>(j)] += ps * v[j];
        }
        std::copy(o.begin(), o.end(), out.begin() + static_cast<std::ptrdiff_t>(l.out_at(b, t, h)));
      }
    }
  }
  return {rounded_tensor(l, out, {l.B, l.T, l.C}), Tensor::from_floats(lse, {l.B, l.NH, l.T})};
}

Tensor reference_backward(const AttentionShape& shape, const Tensor& qkv, const Tensor& dout, DType rounding) {
  check_shape(shape, qkv);
  dout.check_shape({shape.B, shape.T, shape.C()}, "attention reference dout");
  const Layout l = layout_of(shape, rounding);
  const std::vector<float> x = qkv.to_floats(), dy = dout.to_floats();
  std::vector<double> grad(x.size(), 0.0);  // each (b, h) owns its own elements: no two threads add to one
#pragma omp parallel
  {
    std::vector<double> p(static_cast<size_t>(l.T)), dp(static_cast<size_t>(l.T));
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < l.B * l.NH; ++bh) {
      const int64_t b = bh / l.NH, h = bh % l.NH;
      for (int64_t t = 0; t < l.T; ++t) {
        row_probabilities(l, x, b, h, t, p);
        const float* g = dy.data() + l.out_at(b, t, h);
        double D = 0;
        for (int64_t s = 0; s <= t; ++s) {
          dp[static_cast<size_t>(s)] = dot(g, x.data() + l.qkv_at(b, s, 2, h), l.HS);
          D += p[static_cast<size_t>(s)] * dp[static_cast<size_t>(s)];
        }
        const float* q = x.data() + l.qkv_at(b, t, 0, h);
        double* dq = grad.data() + l.qkv_at(b, t, 0, h);
        for (int64_t s = 0; s <= t; ++s) {
          const double ps = l.rounded(p[static_cast<size_t>(s)]);
          const double ds = l.rounded(p[static_cast<size_t>(s)] * (dp[static_cast<size_t>(s)] - D)) * l.scale;
          const float* k = x.data() + l.qkv_at(b, s, 1, h);
          double* dk = grad.data() + l.qkv_at(b, s, 1, h);
          double* dv = grad.data() + l.qkv_at(b, s, 2, h);
          for (int64_t j = 0; j < l.HS; ++j) {
            dq[j] += ds * k[j];
            dk[j] += ds * q[j];
            dv[j] += ps * g[j];
          }
        }
      }
    }
  }
  return rounded_tensor(l, grad, qkv.shape());
}

}  // namespace lab::ch09
