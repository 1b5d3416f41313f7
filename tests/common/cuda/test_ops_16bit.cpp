// The CUDA GELU, residual, LayerNorm, linear layer, embedding and classifier in bf16 and f16 against the f32 CPU ops
// on the same inputs, their results rounded to the 16-bit type: forward and backward (the linear layer's forward with
// a 16-bit out; the embedding's 16-bit out and dout beside f32 tables; the classifier's 16-bit logits and gradient
// beside f32 losses), within one ulp (the bound and why: tests/common/ops/ops_16bit_cases.h), at sizes off the block
// sizes and at GPT-2's width and padded vocabulary; and the dtype mixes the ops refuse. The f32 CUDA ops themselves
// are checked against the CPU in test_ops.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>

#include "tests/common/cuda/gpu_test.h"
#include "tests/common/ops/ops_16bit_cases.h"

namespace lab {
namespace {

using test::kGpu;

// Skips without a GPU, and seeds from the test name so each test draws its own inputs.
class Ops16BitGpu : public ::testing::TestWithParam<test::Storage16> {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    rng_.reseed(std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  }
  Rng rng_;
};

TEST_P(Ops16BitGpu, GeluMatchesF32) {
  // 4096 splits into 16-byte pieces, which GELU's kernels then take (gelu.cu); the others do not.
  for (int64_t n : {1, 255, 257, 4096, 4099}) test::expect_gelu_matches_f32(GetParam().dtype, kGpu, n, rng_);
}

// 4096 splits into 16-byte pieces, which the residual kernels then take (residual.cu); the others do not.
TEST_P(Ops16BitGpu, ResidualMatchesF32) {
  for (int64_t n : {1, 255, 257, 4096, 4099}) test::expect_residual_matches_f32(GetParam().dtype, kGpu, n, rng_);
}

// 64 x 768, 1000 x 256, 7 x 520 and 5 x 1280 split into 16-byte pieces (3, 1, 3 and 5 a lane; in 7 x 520 the last
// lanes have one fewer), whose forward keeps the row in registers and whose backward takes dw and db too
// (layernorm.cu): 4, 59, 1 and 1 blocks of rows, the last one shorter; the others do not.
TEST_P(Ops16BitGpu, LayerNormMatchesF32) {
  for (auto [N, C] :
       {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {33, 129}, {64, 768}, {1000, 256}, {7, 520}, {5, 1280}})
    test::expect_layernorm_matches_f32(GetParam().dtype, kGpu, N, C, rng_);
}

TEST_P(Ops16BitGpu, LinearForwardMatchesF32) {
  for (auto [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 7, 3}, {33, 64, 129}, {64, 768, 96}})
    test::expect_linear_forward_matches_f32(GetParam().dtype, kGpu, N, C, OC, rng_);
}

// 1024 x 520 (65 pieces of 8 16-bit values): dbias's piece kernel (column_sums.cuh) over three blocks of columns,
// the last part full, and 64 chunks of rows.
TEST_P(Ops16BitGpu, LinearBackwardMatchesF32) {
  for (auto [N, C, OC] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 7, 3}, {33, 64, 129}, {64, 768, 96}, {1024, 64, 520}})
    test::expect_linear_backward_matches_f32(GetParam().dtype, kGpu, N, C, OC, rng_);
}

// The last shape puts one id at every position: the blocks beside each other add into the same row of dwte at the
// same time (the emulation build runs blocks on several threads at once, as a GPU does), which only atomics keep.
TEST_P(Ops16BitGpu, EmbeddingMatchesF32) {
  for (auto [B, T, C, Vp, distinct] : {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{1, 1, 1, 1, 1},
                                       {2, 5, 7, 11, 11},
                                       {3, 33, 130, 257, 3},
                                       {2, 17, 768, 1024, 2},
                                       {512, 64, 256, 128, 1}})
    test::expect_embedding_matches_f32(GetParam().dtype, kGpu, B, T, C, Vp, distinct, rng_);
}

// {N, vocab, Vp}: one column, padded columns, vocabularies off the kernel's 512 threads a row, and GPT-2's padded
// vocabulary.
const std::tuple<int64_t, int64_t, int64_t> kClassifierShapes[] = {
    {1, 1, 1}, {3, 10, 16}, {5, 1000, 1024}, {2, 513, 640}, {3, 50257, 50304}};

TEST_P(Ops16BitGpu, ClassifierMatchesF32) {
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, kGpu, N, vocab, Vp, 0.0f, 1.0f / N, rng_);
}

// Logits around 100: exp overflows float past 88, so only a kernel that subtracts the row's maximum gets the losses
// and gradients right.
TEST_P(Ops16BitGpu, ClassifierLogitsFarFromZeroMatchF32) {
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, kGpu, N, vocab, Vp, 100.0f, 1.0f / N, rng_);
}

TEST_P(Ops16BitGpu, ClassifierZeroDlossLeavesLogits) {
  for (auto [N, vocab, Vp] : kClassifierShapes)
    test::expect_classifier_matches_f32(GetParam().dtype, kGpu, N, vocab, Vp, 0.0f, 0.0f, rng_);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Ops16BitGpu, test::storage16_values(), test::storage16_name);

TEST(Ops16BitGpuArguments, MixedDtypesAreInvalid) {
  LAB_REQUIRE_GPU();
  test::expect_mixed_dtypes_invalid(kGpu);
}

}  // namespace
}  // namespace lab
