// The CPU GELU, residual, LayerNorm, linear layer, embedding and classifier in bf16 and f16 against the f32 ops on
// the same inputs, their results rounded to the 16-bit type: forward and backward (the linear layer's forward with a
// 16-bit out; the embedding's 16-bit out and dout beside f32 tables; the classifier's 16-bit logits and gradient beside
// f32 losses), within one ulp (the bound and why: ops_16bit_cases.h), at sizes from one element to GPT-2's width and
// padded vocabulary; and the dtype mixes the ops refuse.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>

#include "tests/common/ops/ops_16bit_cases.h"

namespace lab {
namespace {

// Seeded from the test's name, so each test draws its own inputs.
Rng rng_for_test() {
  return Rng(std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name()));
}

class Ops16BitCpu : public ::testing::TestWithParam<test::Storage16> {};

TEST_P(Ops16BitCpu, GeluMatchesF32) {
  Rng rng = rng_for_test();
  for (int64_t n : {1, 257, 4099}) test::expect_gelu_matches_f32(GetParam().dtype, Device::cpu(), n, rng);
}

TEST_P(Ops16BitCpu, ResidualMatchesF32) {
  Rng rng = rng_for_test();
  for (int64_t n : {1, 257, 4099}) test::expect_residual_matches_f32(GetParam().dtype, Device::cpu(), n, rng);
}

TEST_P(Ops16BitCpu, LayerNormMatchesF32) {
  Rng rng = rng_for_test();
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {33, 129}, {64, 768}})
    test::expect_layernorm_matches_f32(GetParam().dtype, Device::cpu(), N, C, rng);
}

TEST_P(Ops16BitCpu, LinearForwardMatchesF32) {
  Rng rng = rng_for_test();
  for (auto [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 7, 3}, {33, 64, 129}, {64, 768, 96}})
    test::expect_linear_forward_matches_f32(GetParam().dtype, Device::cpu(), N, C, OC, rng);
}

TEST_P(Ops16BitCpu, LinearBackwardMatchesF32) {
  Rng rng = rng_for_test();
  for (auto [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 7, 3}, {33, 64, 129}, {64, 768, 96}})
    test::expect_linear_backward_matches_f32(GetParam().dtype, Device::cpu(), N, C, OC, rng);
}

TEST_P(Ops16BitCpu, NoRowsGiveZeroParameterGradients) {
  test::expect_no_rows_give_zero_param_grads(GetParam().dtype, Device::cpu());
  test::expect_no_rows_give_zero_param_grads(DType::F32, Device::cpu());
}

TEST_P(Ops16BitCpu, EmbeddingMatchesF32) {
  Rng rng = rng_for_test();
  // {B, T, C, Vp, distinct ids}: one element, odd sizes, few ids (every row of dwte a sum of many positions),
  // GPT-2's width, and a single id at every position.
  for (auto [B, T, C, Vp, distinct] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1, 1},
                                       {2, 5, 7, 11, 11},
                                       {3, 33, 130, 257, 3},
                                       {2, 17, 768, 1024, 2},
                                       {16, 64, 96, 128, 1}})
    test::expect_embedding_matches_f32(GetParam().dtype, Device::cpu(), B, T, C, Vp, distinct, rng);
}

// {N, vocab, Vp}: one column, padded columns, a vocabulary off the SIMD widths and GPT-2's padded vocabulary.
const std::tuple<int64_t, int64_t, int64_t> kClassifierShapes[] = {
    {1, 1, 1}, {3, 10, 16}, {5, 1000, 1024}, {2, 513, 640}, {3, 50257, 50304}};

TEST_P(Ops16BitCpu, ClassifierMatchesF32) {
  Rng rng = rng_for_test();
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, Device::cpu(), N, vocab, Vp, 0.0f, 1.0f / N, rng);
}

// Logits around 100: exp overflows float past 88, so only a kernel that subtracts the row's maximum gets the losses
// and gradients right.
TEST_P(Ops16BitCpu, ClassifierLogitsFarFromZeroMatchF32) {
  Rng rng = rng_for_test();
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, Device::cpu(), N, vocab, Vp, 100.0f, 1.0f / N, rng);
}

TEST_P(Ops16BitCpu, ClassifierZeroDlossLeavesLogits) {
  Rng rng = rng_for_test();
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, Device::cpu(), N, vocab, Vp, 0.0f, 0.0f, rng);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Ops16BitCpu, test::storage16_values(), test::storage16_name);

TEST(Ops16BitCpuArguments, MixedDtypesAreInvalid) {
  test::expect_mixed_dtypes_invalid(Device::cpu());
}

}  // namespace
}  // namespace lab
