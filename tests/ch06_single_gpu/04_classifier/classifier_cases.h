// What the classifier lab's CPU and GPU tests share: the shapes the lab is validated at, and a direct check of
// ch06::fused_classifier against the core's CPU reference on logits chosen by the test.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ch06_single_gpu/kernels/04_classifier/classifier_lab.h"
#include "common/core/tensor.h"
#include "common/lab/compare.h"

namespace lab::test {

struct ClassifierCase {
  int64_t rows, vocab, padded_vocab;
  float offset;
  std::string name() const;
  ch06::ClassifierProblem problem(uint64_t seed) const;
};
void PrintTo(const ClassifierCase& c, std::ostream* os);

// Tiny rows and vocabularies; Vp off every multiple of 4 (the scalar path of v4); V just off a float4 (a vector
// straddling the end of the vocabulary), off the 512 threads of a block and off the CPU's 1024-float chunks;
// GPT-2's own; logits around 1000.
std::vector<ClassifierCase> classifier_cases();

// The lab's tolerance for the gradient (classifier_lab.cpp): each element relative to itself with the rounding
// of a V-term sum; elements below one float's rounding of the largest judged in absolute terms.
Tolerance gradient_tolerance(int64_t vocab);

// Runs ch06::fused_classifier on `device` over these logits and targets and expects the losses and (dloss != 0)
// the gradient of the CPU reference (ops::cpu::fused_classifier), or (dloss == 0) the logits unchanged.
void expect_fused_matches_reference(const Tensor& logits, const Tensor& targets, int64_t vocab, float dloss,
                                    Device device);

// Logits [rows, Vp] whose real columns follow `value(row, column)`, padding at 1e4 (above everything).
template <typename Value>
Tensor logits_from(int64_t rows, int64_t vocab, int64_t padded_vocab, Value value) {
  std::vector<float> x(static_cast<size_t>(rows * padded_vocab));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t v = 0; v < padded_vocab; ++v)
      x[static_cast<size_t>(n * padded_vocab + v)] = v < vocab ? value(n, v) : 1e4f;
  return Tensor::from_floats(x, {rows, padded_vocab});
}

// Three rows of logits around 1000 that stress the online pass: row 0 rises along the row (every chunk or vector
// raises the maximum and rescales the sum), row 1 falls (the maximum comes first), row 2 is flat but for a spike
// in the last real column.
Tensor shaped_rows(int64_t vocab, int64_t padded_vocab);

}  // namespace lab::test
