#include "tests/common/ops/batched_attention_cases.h"

#include <cmath>
#include <ostream>
#include <vector>

#include "common/core/error.h"
#include "common/lab/compare.h"
#include "common/ops/attention.h"
#include "common/ops/batched_attention.h"
#include "tests/support/op_check.h"

namespace lab::test {

std::string BatchedCase::name() const {
  return cat("B", B, "_T", T, "_H", NH, "_d", HS, "_", dtype_name(dtype), key_offset != 0.0f ? "_shifted" : "");
}

void PrintTo(const BatchedCase& c, std::ostream* os) {
  *os << c.name();
}

double unit_roundoff(DType dtype) {
  return dtype_epsilon(dtype) / 2;
}

BatchedInputs random_batched_inputs(const BatchedCase& c, Rng& rng) {
  const auto normal = [&](const Shape& shape) {
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    for (float& x : v) x = rng.normal();
    return Tensor::from_floats(v, shape).to_dtype(c.dtype).to_dtype(DType::F32);
  };
  const int64_t C = c.NH * c.HS;
  Tensor qkv = normal({c.B, c.T, 3 * C});
  if (c.key_offset != 0.0f) {
    float* x = qkv.data<float>();
    for (int64_t row = 0; row < c.B * c.T; ++row)
      for (int64_t h = 0; h < c.NH; ++h) x[row * 3 * C + C + h * c.HS] = c.key_offset;
  }
  return {qkv, normal({c.B, c.T, C}), normal({c.B, c.T, 3 * C})};
}

BatchedResult run_batched(const BatchedInputs& in, const BatchedCase& c, Device device, ops::GradWrite write) {
  const auto on_device = [&](const Tensor& t) { return t.to_dtype(c.dtype).to(device); };
  const Tensor qkv = on_device(in.qkv), dout = on_device(in.dout);
  const Tensor dqkv =
      on_device(write == ops::GradWrite::Add ? in.dqkv_before : poisoned(in.qkv.shape(), Device::cpu()));
  const Tensor out = on_device(poisoned(in.dout.shape(), Device::cpu()));
  const Tensor probs = on_device(poisoned({c.B, c.NH, c.T, c.T}, Device::cpu()));
  const int n_head = static_cast<int>(c.NH);
  ops::batched_attention_forward(out, probs, qkv, n_head);
  ops::batched_attention_backward(dqkv, dout, qkv, probs, n_head, write);
  const auto back = [](const Tensor& t) { return t.to(Device::cpu()).to_dtype(DType::F32); };
  return {back(out), back(probs), back(dqkv)};
}

::testing::AssertionResult overwrite_matches_adding_into_zeros(const BatchedCase& c, uint64_t seed, Device device,
                                                               double tol) {
  Rng rng(seed);
  BatchedInputs in = random_batched_inputs(c, rng);
  in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
  const Tensor added = run_batched(in, c, device).dqkv;
  const Tensor written = run_batched(in, c, device, ops::GradWrite::Overwrite).dqkv;
  return all_close("dqkv", written, added, {tol, tol});
}

BatchedResult run_f32_attention(const BatchedInputs& in, const BatchedCase& c) {
  BatchedResult r{poisoned(in.dout.shape(), Device::cpu()), poisoned({c.B, c.NH, c.T, c.T}, Device::cpu()),
                  in.dqkv_before.clone()};
  ops::attention_forward(r.out, r.probs, in.qkv, static_cast<int>(c.NH));
  ops::attention_backward(r.dqkv, in.dout, in.qkv, r.probs, static_cast<int>(c.NH));
  return r;
}

::testing::AssertionResult causal_rows_sum_to_one(const Tensor& probs, DType dtype) {
  const int64_t T = probs.dim(-1), rows = probs.numel() / T;
  const std::vector<float> p = probs.to_floats();
  const double allowed = unit_roundoff(dtype) + 1e-5;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r % T;
    double sum = 0;
    for (int64_t s = 0; s < T; ++s) {
      const float x = p[static_cast<size_t>(r * T + s)];
      if (s > t && x != 0.0f)
        return ::testing::AssertionFailure()
               << "probs row " << r << " (t = " << t << "): " << x << " at s = " << s << ", above the diagonal";
      sum += x;
    }
    if (!(std::abs(sum - 1.0) <= allowed))
      return ::testing::AssertionFailure()
             << "probs row " << r << " (t = " << t << ") sums to " << sum << ", more than " << allowed << " from 1";
  }
  return ::testing::AssertionSuccess();
}

Tensor dqkv_part(const Tensor& dqkv, int part) {
  const int64_t C = dqkv.dim(2) / 3, rows = dqkv.numel() / (3 * C);
  const std::vector<float> all = dqkv.to_floats();
  std::vector<float> v(static_cast<size_t>(rows * C));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < C; ++j)
      v[static_cast<size_t>(r * C + j)] = all[static_cast<size_t>(r * 3 * C + part * C + j)];
  return Tensor::from_floats(v, {dqkv.dim(0), dqkv.dim(1), C});
}

}  // namespace lab::test
