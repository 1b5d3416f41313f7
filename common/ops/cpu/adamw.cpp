// CPU reference of common/ops/adamw.h: one fused, vectorised pass over each stretch of the flat buffers that
// has one weight decay, the stretches in buffer order; with a 16-bit copy, each stretch's parameters are rounded
// into it right after the stretch's update (by the CPU conversion itself, cpu::convert).
#include "common/ops/adamw.h"

#include <cmath>
#include <vector>

#include "common/ops/convert.h"

namespace lab::ops::cpu {

namespace {

struct Constants {
  float beta1, beta2, lr, eps, grad_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

void update(float* p, const float* g, float* mp, float* vp, int64_t begin, int64_t end, const Constants& k,
            float weight_decay) {
  const float b1 = k.beta1, b2 = k.beta2, lr = k.lr, eps = k.eps, wd = weight_decay, scale = k.grad_scale;
  const float bc1 = k.bias_correction1, bc2 = k.bias_correction2;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * scale;
    const float mi = b1 * mp[i] + (1.0f - b1) * gi;
    const float vi = b2 * vp[i] + (1.0f - b2) * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    const float m_hat = mi / bc1;
    const float v_hat = vi / bc2;
    p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * p[i]);
  }
}

}  // namespace

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hp,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay, const Tensor& params_16bit) {
  float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const std::vector<float> step = hp.step_values.defined() ? hp.step_values.to_floats() : adamw_step_values(hp);
  const Constants k{hp.beta1,
                    hp.beta2,
                    step[kStepLr],
                    hp.eps,
                    grad_scale.read(),
                    step[kStepBiasCorrection1],
                    step[kStepBiasCorrection2]};
  if (!std::isfinite(k.grad_scale)) return;  // a skipped step (adamw.h)
  const auto update_and_round = [&](int64_t begin, int64_t end, float weight_decay) {
    update(p, g, mp, vp, begin, end, k, weight_decay);
    if (params_16bit.defined())
      cpu::convert(params_16bit.view(begin, {end - begin}), params.view(begin, {end - begin}));
  };
  int64_t at = 0;  // the first element not updated yet
  for (const ElementRange& r : decay) {
    update_and_round(at, r.begin, 0.0f);
    update_and_round(r.begin, r.end, hp.weight_decay);
    at = r.end;
  }
  update_and_round(at, params.numel(), 0.0f);
}

}  // namespace lab::ops::cpu
