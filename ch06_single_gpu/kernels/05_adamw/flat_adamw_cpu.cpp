// CPU path of ch06_single_gpu/flat_adamw.h: one parallel loop over the whole flat buffer, in blocks of kBlock
// elements shared among the OpenMP threads; within a block, each stretch of one weight decay (inside a decay
// range or between two) is a vectorised loop. The core's CPU op (ops::cpu::adamw_update) opens a parallel loop
// per stretch instead: about a hundred for GPT-2 d12, each a fork and a join of the thread team.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ch06_single_gpu/flat_adamw.h"
#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"

namespace lab::ch06::cpu {

namespace {

// 64K elements (1.75 MB of the four fp32 buffers): enough for a vectorised loop to run at full speed, small
// enough that two threads share GPT-2 d12's 124M elements in ~1900 blocks.
constexpr int64_t kBlock = int64_t{1} << 16;

// Calls body(begin, end, decayed) for the stretches of [begin, end) inside and between the decay ranges, in
// order.
template <typename Body>
void for_each_stretch(const std::vector<ElementRange>& decay, int64_t begin, int64_t end, Body body) {
  // The first range that ends after `begin`.
  auto r = std::upper_bound(decay.begin(), decay.end(), begin,
                            [](int64_t i, const ElementRange& range) { return i < range.end; });
  int64_t at = begin;
  while (at < end) {
    if (r != decay.end() && r->begin <= at) {
      const int64_t stop = std::min(end, r->end);
      body(at, stop, true);
      at = stop;
      ++r;
    } else {
      const int64_t stop = r != decay.end() ? std::min(end, r->begin) : end;
      body(at, stop, false);
      at = stop;
    }
  }
}

// The weights an update starts from, and where it goes: f32 parameters, or bf16 ones with (or without) master
// weights.
inline float weight(const float* params, const float*, int64_t i) {
  return params[i];
}
inline float weight(const uint16_t* params, const float* master, int64_t i) {
  return master != nullptr ? master[i] : adamw::bf16_to_float(params[i]);
}
inline void store_weight(float* params, float*, int64_t i, float w, Bf16Rounding) {
  params[i] = w;
}
inline void store_weight(uint16_t* params, float* master, int64_t i, float w, Bf16Rounding rounding) {
  if (master != nullptr) master[i] = w;
  params[i] = rounding.stochastic
                  ? adamw::bf16_round_stochastic(w, adamw::random_bits(rounding.seed, static_cast<uint64_t>(i)))
                  : adamw::bf16_round_nearest(w);
}

template <typename Param, typename Grad>
void flat_pass(Param* params, float* master, const Grad* grads, float* m, float* v, int64_t n,
               const std::vector<ElementRange>& decay, const adamw::Constants& k, float weight_decay,
               Bf16Rounding rounding) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b)
    for_each_stretch(decay, b * kBlock, std::min(n, (b + 1) * kBlock), [&](int64_t begin, int64_t end, bool decayed) {
      const float wd = decayed ? weight_decay : 0.0f;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i)
        store_weight(params, master, i,
                     adamw::update(weight(params, master, i), adamw::widen(grads[i]), m[i], v[i], k, wd), rounding);
    });
}

}  // namespace

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay) {
  flat_pass(params.data<float>(), nullptr, grads.data<float>(), m.data<float>(), v.data<float>(), params.numel(), decay,
            adamw::constants(hyper, grad_scale), hyper.weight_decay, Bf16Rounding{});
}

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding) {
  uint16_t* p = static_cast<uint16_t*>(params.raw());
  float* w = master.defined() ? master.data<float>() : nullptr;
  const adamw::Constants k = adamw::constants(hyper, grad_scale);
  if (grads.dtype() == DType::BF16)
    flat_pass(p, w, static_cast<const uint16_t*>(grads.raw()), m.data<float>(), v.data<float>(), params.numel(), decay,
              k, hyper.weight_decay, rounding);
  else
    flat_pass(p, w, grads.data<float>(), m.data<float>(), v.data<float>(), params.numel(), decay, k, hyper.weight_decay,
              rounding);
}

}  // namespace lab::ch06::cpu
