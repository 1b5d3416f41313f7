// CUDA path of ch06_single_gpu/flat_adamw.h: the AdamW lab's v4 (fp32) and the bf16 table's versions (bf16
// parameters, fp32 master weights), promoted into lab_ch06.
//
// One kernel over the flat buffer, one template for every storage: Param is float (fp32 parameters) or
// uint16_t (bf16 parameters, with or without fp32 master weights), Grad float or uint16_t (bf16 gradients), and
// kVec the elements a thread updates: 4, with one 128-bit load or store per fp32 buffer (64 bits for bf16), or
// 1 where the layout is not aligned to whole vectors. Every element is read once and written once, coalesced:
// 28 bytes per parameter in fp32 (read p, g, m, v; write p, m, v), 30 with bf16 parameters, fp32 master weights
// and fp32 gradients, 28 with bf16 gradients, 22 without master weights. The kernel's time is memory traffic.
//
// Weight decay by ranges, as the core's kernel (common/ops/cuda/adamw.cu) takes it: the decayed ranges travel in
// the kernel's arguments (a table of up to kRangesPerLaunch) and a binary search says whether an element lies in
// one; a model with more ranges takes one launch per table, each over its stretch of the buffer. Here the search
// runs once per vector: with kVec = 4 every range bound is a multiple of 4 (checked on the host), so the four
// elements of a vector decay alike. The core's kernel runs it once per element, with scalar accesses.
#include <cstdint>
#include <vector>

#include "ch06_single_gpu/flat_adamw.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"
#include "ch06_single_gpu/vector_access.cuh"
#include "common/ops/cuda/decay_table.cuh"
#include "common/ops/cuda/launch.cuh"

namespace lab::ch06::cuda {

namespace {

using ops::cuda::decays;
using ops::cuda::DecayTable;
using ops::cuda::grid_for;
using ops::cuda::kBlockSize;
using ops::cuda::LaunchScope;

// The weights the update starts from: f32 parameters, or the master weights, or the bf16 parameters widened.
template <int kVec>
__device__ void load_weights(const float* params, const float*, int64_t i, float (&w)[kVec]) {
  load_vector(params + i, w);
}
template <int kVec>
__device__ void load_weights(const uint16_t* params, const float* master, int64_t i, float (&w)[kVec]) {
  if (master != nullptr) {
    load_vector(master + i, w);
    return;
  }
  uint16_t bits[kVec];
  load_vector(params + i, bits);
#pragma unroll
  for (int j = 0; j < kVec; ++j) w[j] = adamw::bf16_to_float(bits[j]);
}

template <int kVec>
__device__ void load_gradients(const float* grads, int64_t i, float (&g)[kVec]) {
  load_vector(grads + i, g);
}
template <int kVec>
__device__ void load_gradients(const uint16_t* grads, int64_t i, float (&g)[kVec]) {
  uint16_t bits[kVec];
  load_vector(grads + i, bits);
#pragma unroll
  for (int j = 0; j < kVec; ++j) g[j] = adamw::bf16_to_float(bits[j]);
}

// The updated weights: to the f32 parameters, or to the master weights and, rounded, to the bf16 parameters.
template <int kVec>
__device__ void store_weights(float* params, float*, int64_t i, const float (&w)[kVec], Bf16Rounding) {
  store_vector(params + i, w);
}
template <int kVec>
__device__ void store_weights(uint16_t* params, float* master, int64_t i, const float (&w)[kVec],
                              Bf16Rounding rounding) {
  if (master != nullptr) store_vector(master + i, w);
  uint16_t bits[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    bits[j] = rounding.stochastic
                  ? adamw::bf16_round_stochastic(w[j], adamw::random_bits(rounding.seed, static_cast<uint64_t>(i + j)))
                  : adamw::bf16_round_nearest(w[j]);
  store_vector(params + i, bits);
}

// ---------------------------------------------------------------- kernel

// Elements [first, end) of the buffers, kVec a thread; (end - first) is a multiple of kVec.
template <int kVec, typename Param, typename Grad>
__global__ void flat_adamw_kernel(Param* params, float* master, const Grad* grads, float* m, float* v, int64_t first,
                                  int64_t end, adamw::Constants k, float weight_decay, DecayTable decay,
                                  Bf16Rounding rounding) {
  const int64_t i = first + (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (i >= end) return;
  float w[kVec], g[kVec], mi[kVec], vi[kVec];
  load_weights(params, master, i, w);
  load_gradients(grads, i, g);
  load_vector(m + i, mi);
  load_vector(v + i, vi);
  const float wd = decays(decay, i) ? weight_decay : 0.0f;
#pragma unroll
  for (int j = 0; j < kVec; ++j) w[j] = adamw::update(w[j], g[j], mi[j], vi[j], k, wd);
  store_vector(m + i, mi);
  store_vector(v + i, vi);
  store_weights(params, master, i, w, rounding);
}

// ---------------------------------------------------------------- launcher

bool aligned(const void* p, size_t bytes) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// One launch per table of decay ranges, each over its stretch of the buffer: from where the previous stretch
// ended to the first range of the next table (or the end).
template <typename Param, typename Grad>
void launch_flat_adamw(Param* params, float* master, const Grad* grads, float* m, float* v, int64_t n,
                       const std::vector<ElementRange>& decay, const adamw::Constants& k, float weight_decay,
                       Bf16Rounding rounding, cudaStream_t stream) {
  constexpr int kVec = 4;
  bool vectorised = n % kVec == 0 && aligned(params, kVec * sizeof(Param)) && aligned(master, kVec * sizeof(float)) &&
                    aligned(grads, kVec * sizeof(Grad)) && aligned(m, kVec * sizeof(float)) &&
                    aligned(v, kVec * sizeof(float));
  for (const ElementRange& r : decay) vectorised = vectorised && r.begin % kVec == 0 && r.end % kVec == 0;
  ops::cuda::for_each_decay_stretch(decay, n, [&](int64_t first, int64_t end, const DecayTable& table) {
    if (vectorised)
      LAB_LAUNCH((flat_adamw_kernel<kVec, Param, Grad>),
                 {grid_for((end - first) / kVec, kBlockSize), kBlockSize, 0, stream}, params, master, grads, m, v,
                 first, end, k, weight_decay, table, rounding);
    else
      LAB_LAUNCH((flat_adamw_kernel<1, Param, Grad>), {grid_for(end - first, kBlockSize), kBlockSize, 0, stream},
                 params, master, grads, m, v, first, end, k, weight_decay, table, rounding);
  });
}

}  // namespace

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay) {
  if (params.numel() == 0) return;
  LaunchScope scope(params);
  launch_flat_adamw(params.data<float>(), static_cast<float*>(nullptr), grads.data<float>(), m.data<float>(),
                    v.data<float>(), params.numel(), decay, adamw::constants(hyper, grad_scale), hyper.weight_decay,
                    Bf16Rounding{}, scope.stream());
}

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding) {
  if (params.numel() == 0) return;
  LaunchScope scope(params);
  uint16_t* p = static_cast<uint16_t*>(params.raw());
  float* w = master.defined() ? master.data<float>() : nullptr;
  const adamw::Constants k = adamw::constants(hyper, grad_scale);
  if (grads.dtype() == DType::BF16)
    launch_flat_adamw(p, w, static_cast<const uint16_t*>(grads.raw()), m.data<float>(), v.data<float>(), params.numel(),
                      decay, k, hyper.weight_decay, rounding, scope.stream());
  else
    launch_flat_adamw(p, w, grads.data<float>(), m.data<float>(), v.data<float>(), params.numel(), decay, k,
                      hyper.weight_decay, rounding, scope.stream());
}

}  // namespace lab::ch06::cuda
