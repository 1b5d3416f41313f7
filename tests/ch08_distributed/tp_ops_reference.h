// The vocabulary-parallel ops of ch08_distributed/tp/vocab_parallel_ops.h run over every slice of a whole
// table or of whole logits in one process, with the all-reduces between their passes done on the host: what
// the tp ranks compute together, for comparing with the core's embedding and classifier (CPU) and the CUDA
// kernels with the CPU ones.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/tensor.h"

namespace lab::test {

struct SlicedCrossEntropy {
  std::vector<float> losses;  // [N], the same from every slice
  std::vector<float> grads;   // [N, Vp]: each slice's gradient in its columns
};

// Cross-entropy of logits [N, Vp] (on `device`) over `tp` slices of Vp / tp columns, targets [N] in
// [0, vocab); the gradient of dloss * sum of losses.
SlicedCrossEntropy sliced_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t vocab, int tp,
                                        float dloss);

}  // namespace lab::test
