// CPU reference of common/ops/adamw.h: one fused, vectorised pass over the flat buffers.
#include "common/ops/adamw.h"

#include <cmath>

namespace lab::ops::cpu {

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hp,
                  float grad_scale) {
  float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
  const int64_t n = params.numel();
  const double t = static_cast<double>(hp.step);
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), t));
  const float b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, eps = hp.eps, wd = hp.weight_decay;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_scale;
    const float mi = b1 * mp[i] + (1.0f - b1) * gi;
    const float vi = b2 * vp[i] + (1.0f - b2) * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    const float m_hat = mi / bc1;
    const float v_hat = vi / bc2;
    p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * p[i]);
  }
}

}  // namespace lab::ops::cpu
