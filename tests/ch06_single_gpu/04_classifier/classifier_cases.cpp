#include "tests/ch06_single_gpu/04_classifier/classifier_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ch06_single_gpu/fused_classifier.h"
#include "common/core/error.h"
#include "common/ops/classifier.h"
#include "tests/support/op_check.h"

namespace lab::test {

std::string ClassifierCase::name() const {
  return cat("N", rows, "_V", vocab, "_Vp", padded_vocab, offset != 0.0f ? "_far" : "");
}

ch06::ClassifierProblem ClassifierCase::problem(uint64_t seed) const {
  ch06::ClassifierProblem p;
  p.rows = rows;
  p.vocab = vocab;
  p.padded_vocab = padded_vocab;
  p.offset = offset;
  p.seed = seed;
  return p;
}

void PrintTo(const ClassifierCase& c, std::ostream* os) {
  *os << c.name();
}

std::vector<ClassifierCase> classifier_cases() {
  return {{1, 1, 1, 0},          {2, 1, 4, 0},           {3, 5, 7, 0},       {5, 1001, 1003, 0},
          {4, 1001, 1004, 0},    {7, 1024, 1024, 0},     {3, 1025, 1028, 0}, {2, 4099, 4100, 0},
          {33, 511, 515, 0},     {2, 50257, 50304, 0},   {3, 5, 7, 1000},    {5, 1001, 1003, 1000},
          {4, 1025, 1028, 1000}, {2, 50257, 50304, 1000}};
}

Tolerance gradient_tolerance(int64_t vocab) {
  return {tolerance_for(DType::F32, vocab).rel, tolerance_for(DType::F32, 1).abs};
}

Tensor shaped_rows(int64_t vocab, int64_t padded_vocab) {
  return logits_from(3, vocab, padded_vocab, [vocab](int64_t n, int64_t v) {
    const float x = static_cast<float>(v) / static_cast<float>(vocab);
    if (n == 0) return 1000.0f + 20.0f * x;
    if (n == 1) return 1000.0f - 20.0f * x;
    return v == vocab - 1 ? 1010.0f : 1000.0f;
  });
}

void expect_fused_matches_reference(const Tensor& logits, const Tensor& targets, int64_t vocab, float dloss,
                                    Device device) {
  const int64_t N = logits.dim(0);
  Tensor expected_grad = logits.clone();
  const Tensor expected_loss = Tensor::empty({N}, DType::F32);
  ops::cpu::fused_classifier(expected_grad, expected_loss, targets, vocab, dloss);
  if (dloss == 0.0f) expected_grad = logits;

  const Tensor x = logits.to(device), losses = poisoned({N}, device);
  ch06::fused_classifier(x, losses, targets.to(device), vocab, dloss);
  // The lab's tolerances (classifier_lab.cpp): the losses rounded at the magnitude of the real logits.
  const int64_t Vp = logits.dim(1);
  const std::vector<float> values = logits.to_floats();
  float largest = 0.0f;
  for (int64_t i = 0; i < N * Vp; ++i)
    if (i % Vp < vocab) largest = std::max(largest, std::fabs(values[static_cast<size_t>(i)]));
  EXPECT_TRUE(all_close("losses", losses, expected_loss, tolerance_for_offset(DType::F32, vocab, largest)));
  EXPECT_TRUE(all_close(dloss == 0.0f ? "logits (untouched)" : "dlogits", x, expected_grad,
                        dloss == 0.0f ? Tolerance{} : gradient_tolerance(vocab)));
}

}  // namespace lab::test
