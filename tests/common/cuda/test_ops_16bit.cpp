// The CUDA GELU, residual, LayerNorm and linear layer in bf16 and f16 against the f32 CPU ops on the same inputs,
// their results rounded to the 16-bit type: forward and backward (the linear layer's forward with a 16-bit out),
// within one ulp (the bound and why: tests/common/ops/ops_16bit_cases.h), at sizes off the block sizes and at
// GPT-2's width; and the dtype mixes the ops refuse. The f32 CUDA ops themselves are checked against the CPU in
// test_ops.cpp.
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
  for (int64_t n : {1, 255, 257, 4099}) test::expect_gelu_matches_f32(GetParam().dtype, kGpu, n, rng_);
}

TEST_P(Ops16BitGpu, ResidualMatchesF32) {
  for (int64_t n : {1, 255, 257, 4099}) test::expect_residual_matches_f32(GetParam().dtype, kGpu, n, rng_);
}

TEST_P(Ops16BitGpu, LayerNormMatchesF32) {
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {33, 129}, {64, 768}})
    test::expect_layernorm_matches_f32(GetParam().dtype, kGpu, N, C, rng_);
}

TEST_P(Ops16BitGpu, LinearForwardMatchesF32) {
  for (auto [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 7, 3}, {33, 64, 129}, {64, 768, 96}})
    test::expect_linear_forward_matches_f32(GetParam().dtype, kGpu, N, C, OC, rng_);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Ops16BitGpu, test::storage16_values(), test::storage16_name);

TEST(Ops16BitGpuArguments, MixedDtypesAreInvalid) {
  LAB_REQUIRE_GPU();
  test::expect_mixed_dtypes_invalid(kGpu);
}

}  // namespace
}  // namespace lab
