// AdamW over the flat parameter buffer in one pass: the AdamW lab's fastest versions (kernels/05_adamw), kept
// here tested against the core's update. The trainer does not call them: its optimizer, in every precision and
// with --kernels fused, is the core's lab::AdamW, which already updates the flat buffer in one pass (the lab's v3)
// and, under mixed precision, rounds the model's 16-bit copy of the weights in that pass too (common/ops/adamw.h).
//
// The update of each element is common/ops/adamw.h's (PyTorch semantics: decoupled weight decay, bias
// correction, gradients multiplied by grad_scale first), and so is the weight decay: by ranges of the flat buffer
// (`decay`, sorted and disjoint, ParameterStore::decay_ranges()), so that a whole model's step is one pass
// although its decayed 2-D weights and its biases and LayerNorm parameters alternate. What this adds:
//
//   fewer, wider accesses   on CUDA, four elements a thread with 128-bit loads and stores, the decay looked up
//                           once per vector, when the buffers are 16-byte aligned and every range bound and the
//                           size are multiples of 4 (the project's layouts: parameters start at multiples of 32
//                           elements, and GPT-2's 2-D weights hold multiples of 4); one element a thread
//                           otherwise. On the CPU, one parallel loop over the whole buffer, each thread walking
//                           its share stretch by stretch (the core's loop opens one per stretch).
//   bf16 parameters         flat_adamw_bf16: the parameters the forward and backward read are bf16; the update
//                           is computed in fp32 from the fp32 master weights (or, when `master` is undefined,
//                           from the bf16 value itself, as llm.c does without master weights) and written back
//                           to the master and, rounded, to the bf16 parameters.
//
// Rounding to bf16: to nearest (ties to even), or stochastically (llm.c's choice): up with probability equal to
// the fraction of a bf16 step the value lies above the lower neighbour, so that the rounded value is exact on
// average. Without master weights that is what keeps updates smaller than half a bf16 step from vanishing. The
// random bits are a hash of (seed, element index): deterministic for a seed, the same on both backends and at
// any launch configuration; the caller passes a fresh seed each step (and per shard: indices count from the
// start of the tensors passed).
//
// Shapes: params, grads, m, v (and master) with equal element counts; m, v and master f32; grads f32, or bf16
// in flat_adamw_bf16. All on one device. Ranges outside [0, numel), unsorted or overlapping: InvalidArgument.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/tensor.h"
#include "common/ops/adamw.h"
#include "common/ops/element_range.h"

namespace lab::ch06 {

void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay);

struct Bf16Rounding {
  bool stochastic = false;  // false: to nearest, ties to even
  uint64_t seed = 0;        // stochastic rounding's seed
};

void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding);

namespace cpu {
void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay);
void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding);
}  // namespace cpu
namespace cuda {
void flat_adamw(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay);
void flat_adamw_bf16(const Tensor& params, const Tensor& master, const Tensor& grads, const Tensor& m, const Tensor& v,
                     const ops::AdamWHyper& hyper, float grad_scale, const std::vector<ElementRange>& decay,
                     Bf16Rounding rounding);
}  // namespace cuda

}  // namespace lab::ch06
