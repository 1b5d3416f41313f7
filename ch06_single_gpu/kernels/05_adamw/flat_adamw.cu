// CUDA path of ch06_single_gpu/flat_adamw.h: the AdamW lab's v3 (fp32) and v4 (bf16 parameters with fp32
// master weights), promoted into lab_ch06.
//
// One launch over the whole flat buffer, one thread per element: the weight decay is chosen by the element's
// position (i < decay_end), so the 148 tensors of GPT-2 d12 cost one launch instead of 148 (v1) or one per
// 320 chunks of 64K elements (v2, multi-tensor apply). Each thread reads p, g, m, v once and writes p, m, v
// once, coalesced: 28 bytes per parameter in fp32, all the kernel's time is memory traffic.
//
// The bf16 kernel reads the master weight (or the bf16 parameter when there are no master weights), the
// gradient (f32 or bf16: a template parameter), m and v, and writes the master, m, v and the bf16 parameter
// rounded to nearest or stochastically (adamw_element.h): 30 bytes per parameter with f32 gradients, 28 with
// bf16 ones, 22 without master weights.
#include <cstdint>

#include "ch06_single_gpu/flat_adamw.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::cuda {

namespace {

using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::LaunchScope;

// ---------------------------------------------------------------- kernels

__global__ void flat_adamw_kernel(float* params, const float* grads, float* m, float* v, int64_t n, int64_t decay_end,
                                  adamw::Constants k, float weight_decay) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float mi = m[i], vi = v[i];
  params[i] = adamw::update(params[i], grads[i], mi, vi, k, i < decay_end ? weight_decay : 0.0f);
  m[i] = mi;
  v[i] = vi;
}

// `master` null: the bf16 parameters are the only copy of the weights.
template <typename Grad>
__global__ void flat_adamw_bf16_kernel(uint16_t* params, float* master, const Grad* grads, float* m, float* v,
                                       int64_t n, int64_t decay_end, adamw::Constants k, float weight_decay,
                                       Bf16Rounding rounding) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float p = master != nullptr ? master[i] : adamw::bf16_to_float(params[i]);
  float mi = m[i], vi = v[i];
  const float updated = adamw::update(p, adamw::widen(grads[i]), mi, vi, k, i < decay_end ? weight_decay : 0.0f);
  m[i] = mi;
  v[i] = vi;
  if (master != nullptr) master[i] = updated;
  params[i] = rounding.stochastic
                  ? adamw::bf16_round_stochastic(updated, adamw::random_bits(rounding.seed, static_cast<uint64_t>(i)))
                  : adamw::bf16_round_nearest(updated);
}

}  // namespace

// ---------------------------------------------------------------- launchers

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end) {
  const int64_t n = params.numel();
  if (n == 0) return;
  LaunchScope scope(params);
  LAB_LAUNCH(flat_adamw_kernel, {grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()}, params.data<float>(),
             grads.data<float>(), m.data<float>(), v.data<float>(), n, decay_end, adamw::constants(hyper, grad_scale),
             hyper.weight_decay);
}

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end, Bf16Rounding rounding) {
  const int64_t n = params.numel();
  if (n == 0) return;
  LaunchScope scope(params);
  const ::lab::cuda::LaunchConfig config{grid_for(n, kBlockSize), kBlockSize, 0, scope.stream()};
  uint16_t* p = static_cast<uint16_t*>(params.raw());
  float* w = master.defined() ? master.data<float>() : nullptr;
  const adamw::Constants k = adamw::constants(hyper, grad_scale);
  if (grads.dtype() == DType::BF16)
    LAB_LAUNCH((flat_adamw_bf16_kernel<uint16_t>), config, p, w, static_cast<const uint16_t*>(grads.raw()),
               m.data<float>(), v.data<float>(), n, decay_end, k, hyper.weight_decay, rounding);
  else
    LAB_LAUNCH((flat_adamw_bf16_kernel<float>), config, p, w, grads.data<float>(), m.data<float>(), v.data<float>(), n,
               decay_end, k, hyper.weight_decay, rounding);
}

}  // namespace lab::ch06::cuda
