// The classifier lab's own versions, with the signature of common/ops/classifier.h plus, for the versions that
// materialise the probabilities, the [N, Vp] f32 buffer they store them in (on the logits' device):
//
//   GPU (classifier.cu)                 v1 three-pass softmax, v2 online softmax: each a softmax kernel that
//                                       writes the probabilities, then a cross-entropy kernel and a backward
//                                       kernel that read them back
//   GPU (fused_float4.cu)               v4 the fused kernel with the online pass and float4 accesses
//   CPU (classifier_cpu.cpp)            the same two, as plain loops over rows (OpenMP across rows), and the
//                                       fused loop with the online pass (no probabilities, the row read twice)
//
// v3 is the core's op (ops::fused_classifier), v5 and v6 the promoted one's kernels (ch06::fused_classifier); on the
// CPU the core's fused loop is the promoted op's CPU path. The callers check shapes (as the ops do); targets are
// checked on the CPU only (see common/ops/classifier.h).
#pragma once

#include <cstdint>

#include "common/core/tensor.h"

namespace lab::ch06::classifier {

void gpu_three_pass(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                    const Tensor& probs);
void gpu_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                const Tensor& probs);
void gpu_fused_float4(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss);

void cpu_three_pass(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                    const Tensor& probs);
void cpu_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss,
                const Tensor& probs);
void cpu_fused_online(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab, float dloss);

}  // namespace lab::ch06::classifier
