// The CPU GELU, residual, LayerNorm and linear layer in bf16 and f16 against the f32 ops on the same inputs,
// their results rounded to the 16-bit type: forward and backward (the linear layer's forward with a 16-bit out),
// within one ulp (the bound and why: ops_16bit_cases.h), at sizes from one element to GPT-2's width; and the dtype
// mixes the ops refuse.
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

INSTANTIATE_TEST_SUITE_P(Dtypes, Ops16BitCpu, test::storage16_values(), test::storage16_name);

TEST(Ops16BitCpuArguments, MixedDtypesAreInvalid) {
  test::expect_mixed_dtypes_invalid(Device::cpu());
}

}  // namespace
}  // namespace lab
