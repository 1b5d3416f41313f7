// CPU path of ch06_single_gpu/flat_adamw.h: one pass over the flat buffers (OpenMP threads, SIMD lanes), the
// weight decay chosen by the element's position, the update of adamw_element.h.
#include <cstdint>

#include "ch06_single_gpu/flat_adamw.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"

namespace lab::ch06::cpu {

namespace {

template <typename Grad>
void bf16_pass(uint16_t* params, float* master, const Grad* grads, float* m, float* v, int64_t n, int64_t decay_end,
               const adamw::Constants& k, float weight_decay, Bf16Rounding rounding) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float p = master != nullptr ? master[i] : adamw::bf16_to_float(params[i]);
    const float updated = adamw::update(p, adamw::widen(grads[i]), m[i], v[i], k, i < decay_end ? weight_decay : 0.0f);
    if (master != nullptr) master[i] = updated;
    params[i] = rounding.stochastic
                    ? adamw::bf16_round_stochastic(updated, adamw::random_bits(rounding.seed, static_cast<uint64_t>(i)))
                    : adamw::bf16_round_nearest(updated);
  }
}

}  // namespace

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end) {
  float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const adamw::Constants k = adamw::constants(hyper, grad_scale);
  const float wd = hyper.weight_decay;
  const int64_t n = params.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = adamw::update(p[i], g[i], mp[i], vp[i], k, i < decay_end ? wd : 0.0f);
}

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end, Bf16Rounding rounding) {
  uint16_t* p = static_cast<uint16_t*>(params.raw());
  float* w = master.defined() ? master.data<float>() : nullptr;
  const adamw::Constants k = adamw::constants(hyper, grad_scale);
  if (grads.dtype() == DType::BF16)
    bf16_pass(p, w, static_cast<const uint16_t*>(grads.raw()), m.data<float>(), v.data<float>(), params.numel(),
              decay_end, k, hyper.weight_decay, rounding);
  else
    bf16_pass(p, w, grads.data<float>(), m.data<float>(), v.data<float>(), params.numel(), decay_end, k,
              hyper.weight_decay, rounding);
}

}  // namespace lab::ch06::cpu
