// The classifier lab as data: its versions, each validated against the CPU reference and timed by the kernel
// lab harness (common/lab/kernel_lab.h). The lab executable and the tests build it with the same function.
//
// The problem is GPT-2's last step: logits [N, Vp] over the padded vocabulary (V real columns), a target per
// row; every version computes the losses and overwrites the logits with the gradient of their mean (dloss =
// 1/N), as common/ops/classifier.h specifies. Versions, GPU first (present when a CUDA device is visible):
//   v1  three-pass softmax into a probabilities buffer, then cross-entropy and backward kernels
//   v2  online softmax (maximum and sum in one pass) into the buffer, then the same two kernels
//   v3  the core's fused classifier: one kernel, three passes over each row, no probabilities stored
//   v4  the promoted fused classifier (ch06_single_gpu/fused_classifier.h): online pass + gradient pass, float4
//   CPU the same staircase as loops: three-pass and online (materialised), the core's fused reference (the
//       promoted op's CPU path), and a fused loop with the online pass
#pragma once

#include <cstdint>

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
};

// Makes the inputs and the CPU reference's outputs, and adds the versions.
kernel_lab::KernelLab make_classifier_lab(const ClassifierProblem& problem);

}  // namespace lab::ch06
