// CUDA kernels of common/ops/adamw.h: one fused pass over the flat buffers.
//
// Parallelisation: one thread per parameter, kBlockSize threads a block; each thread reads p, g, m, v
// once and writes p, m, v once (coalesced), so the update runs at memory bandwidth. The bias corrections
// depend only on the step and are computed on the host, in double, exactly as the CPU reference does.
#include <cmath>

#include "common/ops/adamw.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ops::cuda {

namespace {

struct AdamWConstants {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

// ---------------------------------------------------------------- kernel

__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t n, AdamWConstants k) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = grads[i] * k.grad_scale;
  const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float m_hat = mi / k.bias_correction1;
  const float v_hat = vi / k.bias_correction2;
  const float p = params[i];
  params[i] = p - k.lr * (m_hat / (sqrtf(v_hat) + k.eps) + k.weight_decay * p);
}

}  // namespace

// ---------------------------------------------------------------- launcher

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  float grad_scale) {
  const int64_t n = params.numel();
  if (n == 0) return;
  const double t = static_cast<double>(hyper.step);
  const AdamWConstants k{hyper.lr,
                         hyper.beta1,
                         hyper.beta2,
                         hyper.eps,
                         hyper.weight_decay,
                         grad_scale,
                         static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta1), t)),
                         static_cast<float>(1.0 - std::pow(static_cast<double>(hyper.beta2), t))};
  LaunchScope scope(params);
  LAB_LAUNCH(adamw_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, params.data<float>(),
             grads.data<float>(), m.data<float>(), v.data<float>(), n, k);
}

}  // namespace lab::ops::cuda
