// The classifier lab as data: its versions, each validated against the CPU reference and timed by the kernel
// lab harness (common/lab/kernel_lab.h). The lab executable and the tests build it with the same function.
//
// The problem is GPT-2's last step: logits [N, Vp] over the padded vocabulary (V real columns), a target per
// row; every version computes the losses and overwrites the logits with the gradient of their mean (dloss =
// 1/N), as common/ops/classifier.h specifies. Versions, GPU first (present when a CUDA device is visible):
//   v1  three-pass softmax into a probabilities buffer, then cross-entropy and backward kernels
//   v2  online softmax (maximum and sum in one pass) into the buffer, then the same two kernels
//   v3  the core's fused classifier: one kernel, three passes over each row, no probabilities stored
//   v4  fused: online pass + gradient pass, float4
//   v5  fused, each thread's 16-byte pieces of the row kept in registers between the passes, 1024 threads a row
//   v6  the promoted fused classifier (ch06_single_gpu/fused_classifier.h): v5 with the pieces in shared memory,
//       512 threads a row, two rows an SM where a row fits 112 KiB (wider rows run v5)
//   CPU the same staircase as loops: three-pass and online (materialised), the core's fused reference (the
//       promoted op's CPU path), and a fused loop with the online pass
// With 16-bit logits (--dtype bf16 or f16: the model's, under 16-bit activations) only the versions that read them
// run (v3, v5, v6 and the CPU reference); the others keep their numbers and are left out.
#pragma once

#include <cstdint>

#include "common/core/dtype.h"
#include "common/lab/kernel_lab.h"

namespace lab::ch06 {

struct ClassifierProblem {
  int64_t rows = 1024;           // N = B*T
  int64_t vocab = 50257;         // V, GPT-2's vocabulary
  int64_t padded_vocab = 50304;  // Vp, a multiple of 128
  // Real logits are offset + N(0, spread): an offset of 1000 overflows exp() in any version that skips the
  // maximum. The padded columns hold offset + 30 spread, above every real logit, so a version that lets them
  // into the maximum or the sum fails too.
  float offset = 0.0f;
  float spread = 2.0f;
  uint64_t seed = 1;
  DType dtype = DType::F32;  // of the logits and their gradient: f32, bf16 or f16
};

// Makes the inputs and the CPU reference's outputs, and adds the versions.
kernel_lab::KernelLab make_classifier_lab(const ClassifierProblem& problem);

}  // namespace lab::ch06
