// The AdamW lab as data: its versions, each validated against the CPU reference and timed by the kernel lab
// harness (common/lab/kernel_lab.h). The lab executable and the tests build it with the same function.
//
// The problem is one optimizer step over a model's parameters laid out as the project lays them out: one flat
// buffer, each tensor starting at a multiple of 32 elements, weight decay on the 2-D weights' ranges of it
// (common/nn/parameters.h: ParameterStore::decay_ranges()). Two tables:
//
//   fp32   GPU: v1 one launch per tensor (the core's kernel on each tensor), v2 multi-tensor apply (Apex), v3 one
//          launch over the flat buffer (the core's op with its decay ranges), v4 the same with four elements a
//          thread (promoted); CPU: one loop per tensor, the core's op over the flat buffer (one loop per decay
//          stretch), one parallel loop over the flat buffer (promoted)
//   bf16   bf16 parameters with fp32 master weights, the update in fp32 (promoted, ch06::flat_adamw_bf16):
//          rounded to nearest, and stochastically; on the GPU and on the CPU
//
// The CPU reference is common/ops/adamw.h's CPU op over the flat buffer with the layout's decay ranges, as
// lab::AdamW::step calls it.
#pragma once

#include <cstdint>

#include "common/core/dtype.h"
#include "common/lab/kernel_lab.h"
#include "common/nn/parameters.h"
#include "common/ops/adamw.h"

namespace lab::ch06 {

enum class AdamWTable { FP32, BF16 };

struct AdamWProblem {
  AdamWTable table = AdamWTable::FP32;
  DType grad_dtype = DType::F32;  // the bf16 table's gradients: f32 or bf16
  // GPT-2's usual values, at step 10 (the bias corrections still far from 1).
  ops::AdamWHyper hyper{.lr = 6e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 10};
  float grad_scale = 0.5f;  // a clipping coefficient: a version that ignores it fails
  uint64_t seed = 1;        // of the random state, and of the stochastic rounding
};

// Makes the inputs (random values in every tensor of `layout`, zeros in the padding between them, as a model's
// buffers have) and the CPU reference's outputs, and adds the versions. Only the layout of the parameters is
// read (offsets, sizes, decay ranges): `layout` may be any allocated ParameterStore, a GPT-2's included.
kernel_lab::KernelLab make_adamw_lab(const AdamWProblem& problem, const ParameterStore& layout);

}  // namespace lab::ch06
