// The CUDA GELU, residual, LayerNorm, linear layer, embedding and classifier in bf16 and f16 against the f32 CPU ops
// on the same inputs, their results rounded to the 16-bit type: forward and backward (the linear layer's forward with
// a 16-bit out; the embedding's 16-bit out and dout beside f32 tables; the classifier's 16-bit logits and gradient
// beside f32 losses), within one ulp (the bound and why: tests/common/ops/ops_16bit_cases.h), at sizes off the block
// sizes and at GPT-2's width and padded vocabulary; and the dtype mixes the ops refuse. The LayerNorm's 16-byte-piece
// kernels with the residual add folded in (layernorm_pieces.h) against the unfused ops, bit for bit. The f32 CUDA
// ops themselves are checked against the CPU in test_ops.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/ops/cuda/layernorm_pieces.h"
#include "common/ops/layernorm.h"
#include "common/ops/residual.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/ops/ops_16bit_cases.h"
#include "tests/support/test_support.h"

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

// The fused forward (sum = a + b, then its LayerNorm) and the backward with dx's copy, against residual_forward and
// layernorm_forward, layernorm_backward and residual_gradient_copy on the same inputs: the same bits (the sum rounded
// as residual_forward rounds it, then normalised as stored). 1 x 8 to 5 x 1280 split into 16-byte pieces (1 to 5 a
// lane); 4 x 36 does not, and the fused launchers queue nothing there.
TEST_P(Ops16BitGpu, LayerNormPiecesWithTheResidualAddAreTheUnfusedOpsBitForBit) {
  const DType dtype = GetParam().dtype;
  for (const auto& shape : {std::pair<int64_t, int64_t>{1, 8}, {6, 40}, {64, 768}, {5, 1280}, {4, 36}}) {
    const int64_t N = shape.first, C = shape.second;  // not a structured binding: the lambdas below capture them
    const std::string where = std::to_string(N) + " x " + std::to_string(C);
    const auto on_gpu = [&](float std) { return test::random_normal({N, C}, rng_, std).to_dtype(dtype).to(kGpu); };
    const Tensor a = on_gpu(2.0f), b = on_gpu(1.0f), dout = on_gpu(1.0f), dsum_given = on_gpu(1.0f);
    const Tensor w = test::random_normal({C}, rng_).to(kGpu), bias = test::random_normal({C}, rng_).to(kGpu);
    const auto f32 = [&](int64_t n) { return Tensor::zeros({n}, DType::F32, kGpu); };
    const bool pieces = C % 8 == 0;

    const Tensor sum = Tensor::zeros({N, C}, dtype, kGpu), out = Tensor::zeros({N, C}, dtype, kGpu);
    const Tensor mean = f32(N), rstd = f32(N);
    EXPECT_EQ(ops::cuda::residual_layernorm_forward_in_pieces(sum, out, mean, rstd, a, b, w, bias), pieces) << where;
    const Tensor sum_ref = Tensor::zeros({N, C}, dtype, kGpu), out_ref = Tensor::zeros({N, C}, dtype, kGpu);
    const Tensor mean_ref = f32(N), rstd_ref = f32(N);
    ops::residual_forward(sum_ref, a, b);
    ops::layernorm_forward(out_ref, mean_ref, rstd_ref, sum_ref, w, bias);
    if (!pieces) {
      EXPECT_EQ(sum.to_floats(), std::vector<float>(static_cast<size_t>(N * C), 0.0f)) << where << ": written";
      continue;
    }
    EXPECT_EQ(sum.to_floats(), sum_ref.to_floats()) << where;
    EXPECT_EQ(out.to_floats(), out_ref.to_floats()) << where;
    EXPECT_EQ(mean.to_floats(), mean_ref.to_floats()) << where;
    EXPECT_EQ(rstd.to_floats(), rstd_ref.to_floats()) << where;

    // Both ways of writing dsum, and of writing dw and db: written over NaNs, they must be what adding into zeros
    // gives.
    for (const auto& [write, params_write] : {std::pair{ops::GradWrite::Add, ops::GradWrite::Add},
                                              {ops::GradWrite::Overwrite, ops::GradWrite::Add},
                                              {ops::GradWrite::Add, ops::GradWrite::Overwrite},
                                              {ops::GradWrite::Overwrite, ops::GradWrite::Overwrite}}) {
      const bool add_params = params_write == ops::GradWrite::Add;
      const std::string how = where + (write == ops::GradWrite::Add ? ", added to" : ", written over") +
                              (add_params ? ", dw and db added to" : ", dw and db written over");
      const Tensor dsum = dsum_given.clone(), dcopy = Tensor::zeros({N, C}, dtype, kGpu);
      const Tensor dw = test::random_normal({C}, rng_).to(kGpu), db = test::random_normal({C}, rng_).to(kGpu);
      const Tensor dsum_ref = dsum_given.clone(), dcopy_ref = Tensor::zeros({N, C}, dtype, kGpu);
      const Tensor dw_ref = add_params ? dw.clone() : f32(C), db_ref = add_params ? db.clone() : f32(C);
      if (!add_params) {
        dw.fill_(std::numeric_limits<float>::quiet_NaN());
        db.fill_(std::numeric_limits<float>::quiet_NaN());
      }
      EXPECT_TRUE(
          ops::cuda::layernorm_backward_in_pieces(dsum, dcopy, dw, db, dout, sum, w, mean, rstd, write, params_write))
          << how;
      ops::layernorm_backward(dsum_ref, dw_ref, db_ref, dout, sum_ref, w, mean_ref, rstd_ref, write);
      ops::residual_gradient_copy(dcopy_ref, dsum_ref);
      EXPECT_EQ(dsum.to_floats(), dsum_ref.to_floats()) << how;
      EXPECT_EQ(dcopy.to_floats(), dcopy_ref.to_floats()) << how;
      EXPECT_EQ(dw.to_floats(), dw_ref.to_floats()) << how;
      EXPECT_EQ(db.to_floats(), db_ref.to_floats()) << how;
    }
  }
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

TEST_P(Ops16BitGpu, NoRowsGiveZeroParameterGradients) {
  test::expect_no_rows_give_zero_param_grads(GetParam().dtype, kGpu);
  test::expect_no_rows_give_zero_param_grads(DType::F32, kGpu);
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
