// CUDA kernels of common/ops/adamw.h: one fused pass over the flat buffers.
//
// Parallelisation: one thread per parameter, kBlockSize threads a block; each thread reads p, g, m, v
// once and writes p, m, v once (coalesced), so the update runs at memory bandwidth. The bias corrections
// depend only on the step and are computed on the host, in double, exactly as the CPU reference does
// (adamw_step_values); with hyper.step_values they are read from device memory instead, with the learning rate,
// where the host wrote them before the launch (or before a CUDA graph's replay).
//
// With the parameters' 16-bit copy (adamw.h), the thread also stores its new parameter rounded to the copy's type:
// 2 bytes more a parameter, where ops::convert's pass would read 4 and write 2 after the update.
//
// Weight decay by ranges (decay_table.cuh): the decayed ranges travel in the kernel's arguments (a table of up to
// kRangesPerLaunch), and each thread finds by binary search whether its element lies in one. Parameters start
// at multiples of 32 elements, so the 32 threads of a warp nearly always agree and read the same entries
// (a broadcast). A model with more ranges than a table holds (GPT-2 d12 has 49) takes one launch per table,
// each over the stretch of the buffer from its first range to the next table's.
#include <vector>

#include "common/ops/adamw.h"
#include "common/ops/cuda/decay_table.cuh"
#include "common/ops/cuda/dtype_dispatch.cuh"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/loss_scale.h"

namespace lab::ops::cuda {

namespace {

struct AdamWConstants {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};

// Elements [first, end) of the buffers.
// The gradient scale is k.grad_scale, times *grad_scale when it points to one the step computed on the device (not
// finite: the step is skipped, and every thread leaves its element as it was); lr and
// the bias corrections are k's, or step_values' when it points to them (AdamWStepValue order). copy: the 16-bit copy
// of the parameters, or null.
template <typename Copy>
__global__ void adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t first, int64_t end,
                             AdamWConstants k, const float* grad_scale, const float* step_values, DecayTable decay,
                             Copy* copy) {
  const int64_t i = first + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= end) return;
  if (step_values) {
    k.lr = step_values[kStepLr];
    k.bias_correction1 = step_values[kStepBiasCorrection1];
    k.bias_correction2 = step_values[kStepBiasCorrection2];
  }
  const float scale = grad_scale ? k.grad_scale * *grad_scale : k.grad_scale;
  if (!finite_value(scale)) return;
  const float g = grads[i] * scale;
  const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * g;
  const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * g * g;
  m[i] = mi;
  v[i] = vi;
  const float m_hat = mi / k.bias_correction1;
  const float v_hat = vi / k.bias_correction2;
  const float p = params[i];
  const float weight_decay = decays(decay, i) ? k.weight_decay : 0.0f;
  const float updated = p - k.lr * (m_hat / (sqrtf(v_hat) + k.eps) + weight_decay * p);
  params[i] = updated;
  if (copy) copy[i] = store_as<Copy>(updated);
}

// Launches adamw_kernel over [0, n) of the buffers, one launch per table of decayed ranges.
template <typename Copy>
void launch_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWConstants& k,
                  const float* grad_scale, const float* step_values, const std::vector<ElementRange>& decay, Copy* copy,
                  cudaStream_t stream) {
  for_each_decay_stretch(decay, params.numel(), [&](int64_t first, int64_t end, const DecayTable& table) {
    LAB_LAUNCH(adamw_kernel<Copy>, {grid_for(end - first, kBlockSize), kBlockSize, 0, stream}, params.data<float>(),
               grads.data<float>(), m.data<float>(), v.data<float>(), first, end, k, grad_scale, step_values, table,
               copy);
  });
}

}  // namespace

// ---------------------------------------------------------------- launcher

void adamw_update(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v, const AdamWHyper& hyper,
                  const GradScale& grad_scale, const std::vector<ElementRange>& decay, const Tensor& params_16bit) {
  const int64_t n = params.numel();
  if (n == 0) return;
  const bool on_device = hyper.step_values.defined();
  const std::vector<float> step = on_device ? std::vector<float>(kStepValues, 1.0f) : adamw_step_values(hyper);
  const AdamWConstants k{step[kStepLr],
                         hyper.beta1,
                         hyper.beta2,
                         hyper.eps,
                         hyper.weight_decay,
                         grad_scale.value,
                         step[kStepBiasCorrection1],
                         step[kStepBiasCorrection2]};
  const float* device_scale = grad_scale.device_pointer();
  const float* step_values = on_device ? hyper.step_values.data<float>() : nullptr;
  LaunchScope scope(params);
  if (params_16bit.defined() && params_16bit.dtype() == DType::F16)
    launch_adamw(params, grads, m, v, k, device_scale, step_values, decay, device_data<F16>(params_16bit),
                 scope.stream());
  else  // bf16, or no copy (a null copy of either type)
    launch_adamw(params, grads, m, v, k, device_scale, step_values, decay,
                 params_16bit.defined() ? device_data<Bf16>(params_16bit) : nullptr, scope.stream());
}

}  // namespace lab::ops::cuda
