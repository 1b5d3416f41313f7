// The 16-bit Linear of mixed precision on the CPU: each of its four outputs against fp64 within a small factor
// of the error of the textbook 16-bit computation, and equal (up to the order of fp32 sums) to that computation,
// so the inputs, the weight and dout are rounded exactly where a GPU's 16-bit product rounds them; fp16's range:
// small gradients vanish from fp16 products, and loss scaling brings them back; the conversion op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/lab/compare.h"
#include "common/ops/convert.h"
#include "tests/ch06_single_gpu/mixed_precision/linear_cases.h"

namespace lab::test {
namespace {

struct Output {
  const char* name;
  Tensor LinearResult::*field;
  int64_t reduction;  // the length of the sums behind one element
};

class LowPrecisionLinear : public ::testing::TestWithParam<DType> {};

TEST_P(LowPrecisionLinear, MatchesTheTextbook16BitProductsOnTheCpu) {
  const DType dtype = GetParam();
  constexpr int64_t N = 37, C = 96, OC = 50;
  Rng rng(11);
  const LinearCase c = random_linear_case(N, C, OC, rng);
  const LinearResult actual = low_precision_linear_on(c, dtype, Device::cpu());
  const LinearResult baseline = reference_linear(c, dtype, false);
  const LinearResult exact = reference_linear(c, DType::F32, true);
  for (const Output& o : {Output{"out", &LinearResult::out, C}, Output{"dx", &LinearResult::dx, OC},
                          Output{"dweight", &LinearResult::dweight, N}, Output{"dbias", &LinearResult::dbias, N}}) {
    const ErrorRatioReport ratio =
        compare_error_to_baseline(actual.*o.field, baseline.*o.field, exact.*o.field, DType::F32);
    EXPECT_TRUE(ratio.ok()) << ratio.describe(o.name);
    const CloseReport same_products =
        compare_close(actual.*o.field, baseline.*o.field, tolerance_for(DType::F32, o.reduction));
    EXPECT_TRUE(same_products.ok()) << same_products.describe(o.name);
  }
  // The rounding is real: the products differ from fp32's by about the 16-bit epsilon, the bias gradient not.
  const LinearResult fp32 = reference_linear(c, DType::F32, false);
  EXPECT_FALSE(compare_close(actual.out, fp32.out, tolerance_for(DType::F32, C)).ok());
  EXPECT_TRUE(compare_close(actual.out, fp32.out, tolerance_for(dtype, C)).ok());
  EXPECT_TRUE(compare_close(actual.dbias, fp32.dbias, tolerance_for(DType::F32, N)).ok());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LowPrecisionLinear, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Why fp16 needs loss scaling: a gradient of 1e-8 is below fp16's smallest subnormal (6e-8) and is flushed to
// zero where the products read it; bf16 (fp32's exponent range) keeps it. Scaled by 2^16 first, it survives fp16.
TEST(LowPrecisionLinear, SmallGradientsVanishFromFp16ProductsUnlessScaled) {
  constexpr int64_t N = 8, C = 16, OC = 12;
  Rng rng(3);
  LinearCase c = random_linear_case(N, C, OC, rng);
  const auto dx_with_dout = [&](float value, DType dtype) {
    c.dout.fill_(value);
    return low_precision_linear_on(c, dtype, Device::cpu());
  };
  const auto max_abs = [](const Tensor& t) {
    double m = 0;
    for (float v : t.to_floats()) m = std::max(m, std::fabs(static_cast<double>(v)));
    return m;
  };
  const LinearResult fp16 = dx_with_dout(1e-8f, DType::F16);
  EXPECT_EQ(max_abs(fp16.dx), 0.0);
  EXPECT_EQ(max_abs(fp16.dweight), 0.0);
  EXPECT_NEAR(fp16.dbias.to_floats()[0], N * 1e-8, 1e-12);  // the bias gradient sums the fp32 dout
  EXPECT_GT(max_abs(dx_with_dout(1e-8f, DType::BF16).dx), 0.0);
  const LinearResult scaled = dx_with_dout(1e-8f * 65536.0f, DType::F16);
  const LinearResult scaled_fp32 = reference_linear(c, DType::F32, true);
  EXPECT_TRUE(compare_close(scaled.dx, scaled_fp32.dx, tolerance_for(DType::F16, OC)).ok());
}

TEST(Convert, RoundsToNearestEvenOverflowsAndKeepsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {1.0f, -0.0f, 65504.0f, 65520.0f, -1e6f, 1e-8f, 3.0e-5f, 1.00048828125f, nan};
  const Tensor src = Tensor::from_floats(values, {static_cast<int64_t>(values.size())});
  const Tensor f16 = Tensor::empty(src.shape(), DType::F16), bf16 = Tensor::empty(src.shape(), DType::BF16);
  ops::convert(f16, src);
  ops::convert(bf16, src);
  const Tensor back = Tensor::empty(src.shape(), DType::F32);
  ops::convert(back, f16);
  const std::vector<float> h = back.to_floats();
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_TRUE(std::signbit(h[1]) && h[1] == 0.0f);
  EXPECT_EQ(h[2], 65504.0f);  // fp16's largest
  EXPECT_EQ(h[3], inf);       // halfway to the next binade rounds up: overflow
  EXPECT_EQ(h[4], -inf);
  EXPECT_EQ(h[5], 0.0f);              // below half the smallest subnormal
  EXPECT_NEAR(h[6], 3.0e-5f, 6e-8f);  // a subnormal, within one subnormal step
  EXPECT_EQ(h[7], 1.0f);              // a tie (1 + 2^-11): to the even neighbour
  EXPECT_TRUE(std::isnan(h[8]));
  ops::convert(back, bf16);
  const std::vector<float> b = back.to_floats();
  EXPECT_EQ(b[3], 65536.0f);  // bf16 keeps fp32's range: no overflow
  EXPECT_GT(b[5], 0.0f);
  EXPECT_TRUE(std::isnan(b[8]));
  const std::vector<float> by_tensor = f16.to_floats();  // Tensor's own widening agrees (NaN aside: NaN != NaN)
  EXPECT_EQ(std::vector<float>(by_tensor.begin(), by_tensor.end() - 1), std::vector<float>(h.begin(), h.end() - 1));
  EXPECT_TRUE(std::isnan(by_tensor.back()));
}

TEST(Convert, RejectsOtherPairsAndSizes) {
  const Tensor f32 = Tensor::zeros({4}, DType::F32);
  EXPECT_THROW(ops::convert(Tensor::zeros({4}, DType::F32), f32), Error);
  EXPECT_THROW(ops::convert(Tensor::zeros({4}, DType::BF16), Tensor::zeros({4}, DType::F16)), Error);
  EXPECT_THROW(ops::convert(Tensor::zeros({5}, DType::BF16), f32), Error);
  EXPECT_THROW(ops::convert(Tensor::zeros({4}, DType::I32), f32), Error);
}

}  // namespace
}  // namespace lab::test
