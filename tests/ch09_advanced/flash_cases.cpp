#include "tests/ch09_advanced/flash_cases.h"

#include <ostream>
#include <vector>

#include "common/core/error.h"
#include "common/lab/compare.h"
#include "common/ops/attention.h"
#include "common/ops/flash_attention.h"

namespace lab::test {

std::string FlashCase::name() const {
  return cat("B", B, "_T", T, "_H", NH, "_d", HS, spread != 1.0f ? "_peaked" : "");
}

void PrintTo(const FlashCase& c, std::ostream* os) {
  *os << c.name();
}

FlashInputs random_flash_inputs(const FlashCase& c, Rng& rng) {
  const int64_t C = c.NH * c.HS;
  std::vector<float> qkv(static_cast<size_t>(c.B * c.T * 3 * C));
  for (size_t i = 0; i < qkv.size(); ++i) {
    const bool is_v = static_cast<int64_t>(i) % (3 * C) >= 2 * C;
    qkv[i] = rng.normal(0.0f, is_v ? 1.0f : c.spread);
  }
  const auto normal = [&](const Shape& shape) {
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    for (float& x : v) x = rng.normal();
    return Tensor::from_floats(v, shape);
  };
  return {Tensor::from_floats(qkv, {c.B, c.T, 3 * C}), normal({c.B, c.T, C}), normal({c.B, c.T, 3 * C})};
}

AttentionResult run_materialized(const FlashInputs& in, int64_t n_head) {
  const Device device = in.qkv.device();
  const int64_t B = in.qkv.dim(0), T = in.qkv.dim(1);
  AttentionResult r{Tensor::empty(in.dout.shape(), DType::F32, device), in.dqkv_before.clone(), Tensor()};
  const Tensor att = Tensor::empty({B, n_head, T, T}, DType::F32, device);
  ops::attention_forward(r.out, att, in.qkv, static_cast<int>(n_head));
  ops::attention_backward(r.dqkv, in.dout, in.qkv, att, static_cast<int>(n_head));
  return r;
}

FlashInputs rounded_to(const FlashInputs& in, DType dtype) {
  if (dtype == DType::F32) return in;
  const auto round = [&](const Tensor& t) { return t.to_dtype(dtype).to_dtype(DType::F32); };
  return {round(in.qkv), round(in.dout), round(in.dqkv_before)};
}

AttentionResult run_flash(const FlashInputs& in, int64_t n_head, DType dtype, Device device, ops::GradWrite write,
                          ops::FlashBackward passes) {
  const auto on_device = [&](const Tensor& t) { return (dtype == DType::F32 ? t : t.to_dtype(dtype)).to(device); };
  const Tensor qkv = on_device(in.qkv), dout = on_device(in.dout);
  const int64_t B = qkv.dim(0), T = qkv.dim(1);
  const Tensor dqkv_before = write == ops::GradWrite::Add ? in.dqkv_before : poisoned(in.qkv.shape(), Device::cpu());
  AttentionResult r{on_device(poisoned(in.dout.shape(), Device::cpu())), on_device(dqkv_before),
                    poisoned({B, n_head, T}, device)};
  ops::flash_attention_forward(r.out, r.lse, qkv, static_cast<int>(n_head));
  ops::flash_attention_backward(r.dqkv, dout, qkv, r.out, r.lse, static_cast<int>(n_head), write, passes);
  return r;
}

}  // namespace lab::test
