// AdamW over the flat parameter buffer in one pass, promoted from the AdamW lab (kernels/05_adamw), for the
// trainer's --kernels fused and its mixed precision.
//
// The update of each element is common/ops/adamw.h's (PyTorch semantics: decoupled weight decay, bias
// correction, gradients multiplied by grad_scale first), with two differences in what one call covers:
//
//   weight decay on a range   elements [0, decay_end) decay with hyper.weight_decay, the others not at all. The
//                             project lays out the 2-D weights first (ParameterStore::decay_numel()), so a whole
//                             model's step is one launch: no list of tensors, no per-tensor launches. A shard of
//                             the flat buffer (ZeRO) passes its own decay_end, clipped to [0, numel].
//   bf16 parameters           flat_adamw_bf16: the parameters the forward and backward read are bf16; the update
//                             is computed in fp32 from the fp32 master weights (or, when `master` is undefined,
//                             from the bf16 value itself, as llm.c does without master weights) and written back
//                             to the master and, rounded, to the bf16 parameters.
//
// Rounding to bf16: to nearest (ties to even), or stochastically (llm.c's choice): up with probability equal to
// the fraction of a bf16 step the value lies above the lower neighbour, so that the rounded value is exact on
// average. Without master weights that is what keeps updates smaller than half a bf16 step from vanishing. The
// random bits are a hash of (seed, element index): deterministic for a seed, the same on both backends and at
// any launch configuration; the caller passes a fresh seed each step (and per shard: indices count from the
// start of the tensors passed).
//
// Shapes: params, grads, m, v (and master) with equal element counts; m, v and master f32; grads f32, or bf16
// in flat_adamw_bf16. All on one device.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/adamw.h"

namespace lab::ch06 {

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end);

struct Bf16Rounding {
  bool stochastic = false;  // false: to nearest, ties to even
  uint64_t seed = 0;        // stochastic rounding's seed
};

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end, Bf16Rounding rounding);

namespace cpu {
void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end);
void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end, Bf16Rounding rounding);
}  // namespace cpu
namespace cuda {
void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end);
void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, int64_t decay_end, Bf16Rounding rounding);
}  // namespace cuda

}  // namespace lab::ch06
