// The fused classifier, promoted from the classifier lab (kernels/04_classifier, v6 and v5): softmax, cross-entropy
// and the logits' gradient in one kernel that reads each row of logits once (twice for the part of a wide f32 row
// past what its threads keep in registers) and never stores the probabilities, for the trainer's --kernels fused.
//
// The contract is common/ops/classifier.h's, word for word, so the two are interchangeable:
//   logits [N, Vp] (f32, bf16 or f16; fp32 arithmetic inside, each gradient rounded once) over the padded vocabulary,
//   only the first `vocab` columns real; targets [N] i32 in [0, vocab); losses [N] f32:
//     losses[n] = logsumexp(logits[n, :vocab]) - logits[n, targets[n]]
//   when dloss != 0 the logits are overwritten with the gradient of dloss * sum_n losses[n]:
//     logits[n, v] = dloss * (softmax(logits[n, :vocab])[v] - [v == targets[n]])   for v < vocab
//     logits[n, v] = 0                                                             for vocab <= v < Vp
//   and when dloss == 0 they are left as they were; dloss is a number or dloss.value times a scale on the device
//   (ops::GradScale), as there.
// A target outside [0, vocab) is an error on the CPU; on CUDA (where checking would cost a host
// synchronisation) it gives a NaN loss and a NaN gradient row, and nothing outside the row is touched.
//
// What differs from the core's op is how, on CUDA: the maximum and the sum of exponentials come from one pass
// (online softmax) over 16-byte pieces that each thread keeps on chip for the gradient pass (in shared memory for
// rows of up to 112 KiB, two rows an SM; in registers for wider ones), where the rows
// split into pieces (Vp a multiple of 4 f32 or 8 16-bit logits, a 16-byte aligned base; other rows take the
// core's kernel). On the CPU it is the core's loop: a row stays in L2 between its passes there, and the lab's CPU loop
// with the online pass measured no faster.
#pragma once

#include <cstdint>

#include "common/core/tensor.h"
#include "common/ops/grad_scale.h"

namespace lab::ch06 {

void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const ops::GradScale& dloss);

namespace cpu {
void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const ops::GradScale& dloss);
}  // namespace cpu
namespace cuda {
void fused_classifier(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                      const ops::GradScale& dloss);
// The classifier lab's v5 for every row, for the lab and the tests (fused_classifier takes it only for rows too wide
// for v6): each thread's pieces kept in registers.
void fused_classifier_registers(const Tensor& logits, const Tensor& losses, const Tensor& targets, int64_t vocab,
                                const ops::GradScale& dloss);
}  // namespace cuda

}  // namespace lab::ch06
