// The CUDA batched attention (common/ops/cuda/batched_attention.cu: cuBLASLt over the heads, the softmax row
// kernels) against the CPU batched attention, in bf16 and f16, at T = 1, 37 and 70 (not multiples of the warp's
// 32 lanes) and 64, 1 to 4 heads, head sizes 8 to 64, and scores shifted by hundreds per row (exp overflows unless
// the row's max is subtracted); the causal structure of the stored probabilities; that the backward adds into
// dqkv; f32 as the f32 op. Label cuda: these run in the emulation build and skip without a GPU.
//
// Tolerance: both backends round at the same points, from f32 values that differ only by the order of f32 sums
// (and expf against the CPU's polynomial exp, 2 f32 ulps). So a stored 16-bit value is the same or its neighbour,
// one 16-bit ulp (2u relative) away: rel 2u per element. A neighbour taken by an intermediate (a P or a dS) moves
// the sums it enters by 2u of its share; abs 2u of the tensor's largest value covers that.
//
// Except one feature of dq in the shifted cases. Every key's feature 0 there is the offset itself, so
// dq[t, 0] = offset / sqrt(HS) * sum_j dS[t, j] for each head, and the exact sum of a row of dS is 0: what remains
// is the rounding of each dS to 16 bits (it is a product's operand), magnified by offset / sqrt(HS) = 125. Each side
// leaves at most u sum_j |dS[t, j]| of it, so the two differ by at most 2u of that, times 125: a value set by
// rounding alone, which no order of sums makes equal (it passed or failed by the CPU's instruction set). That
// feature is checked against this bound, computed here from the CPU's probabilities, and the rest as above.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/cuda/gpu_test.h"
#include "tests/common/ops/batched_attention_cases.h"
#include "tests/support/op_check.h"

namespace lab {
namespace {

using test::BatchedCase;
using test::BatchedInputs;
using test::BatchedResult;
using test::kGpu;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

const BatchedCase kCases[] = {
    {1, 1, 1, 8, DType::BF16},   {2, 37, 3, 16, DType::BF16},          {1, 70, 2, 64, DType::BF16},
    {1, 64, 4, 32, DType::BF16}, {1, 70, 2, 64, DType::BF16, 1000.0f}, {1, 1, 2, 16, DType::F16},
    {2, 37, 3, 16, DType::F16},  {1, 70, 4, 64, DType::F16},           {1, 70, 2, 64, DType::F16, 1000.0f}};

class BatchedAttentionGpu : public ::testing::TestWithParam<BatchedCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

// sum_j |dS[t, j]| for every (b, h, t): dS = P (dP - D), dP[t, j] = dout[t] . v[j], D[t] = sum_j P[t, j] dP[t, j],
// from the probabilities `probs` and the inputs (per head, as [B, NH, T]).
std::vector<double> ds_row_sums(const BatchedInputs& in, const Tensor& probs, const BatchedCase& c) {
  const int64_t C = c.NH * c.HS, T = c.T;
  const std::vector<float> qkv = in.qkv.to_floats(), dout = in.dout.to_floats(), p = probs.to_floats();
  std::vector<double> sums(static_cast<size_t>(c.B * c.NH * T)), dp(static_cast<size_t>(T));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.NH; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const float* row_p = &p[static_cast<size_t>(((b * c.NH + h) * T + t) * T)];
        double d = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.HS; ++e)
            dot += static_cast<double>(dout[static_cast<size_t>((b * T + t) * C + h * c.HS + e)]) *
                   qkv[static_cast<size_t>((b * T + j) * 3 * C + 2 * C + h * c.HS + e)];
          dp[static_cast<size_t>(j)] = dot;
          d += row_p[j] * dot;
        }
        double sum = 0;
        for (int64_t j = 0; j <= t; ++j) sum += row_p[j] * std::fabs(dp[static_cast<size_t>(j)] - d);
        sums[static_cast<size_t>((b * c.NH + h) * T + t)] = sum;
      }
  return sums;
}

// In a shifted case: dq's feature 0 of every head within 2u offset / sqrt(HS) sum_j |dS| (plus the usual bound) of
// the CPU's, then set equal on both sides so that the comparison of the rest leaves it out (see the header).
void check_and_set_aside_shifted_feature(const BatchedInputs& in, const BatchedResult& cpu, BatchedResult& gpu,
                                         const BatchedCase& c) {
  const int64_t C = c.NH * c.HS;
  const std::vector<double> ds_sums = ds_row_sums(in, cpu.probs, c);
  const double u = test::unit_roundoff(c.dtype), amplification = c.key_offset / std::sqrt(static_cast<double>(c.HS));
  const std::vector<float> expected = cpu.dqkv.to_floats();
  std::vector<float> actual = gpu.dqkv.to_floats();
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t h = 0; h < c.NH; ++h) {
        const size_t i = static_cast<size_t>((b * c.T + t) * 3 * C + h * c.HS);
        const double allowed = 2 * u * amplification * ds_sums[static_cast<size_t>((b * c.NH + h) * c.T + t)] +
                               2 * u * std::fabs(expected[i]) + 1e-6;
        EXPECT_LE(std::fabs(actual[i] - expected[i]), allowed)
            << "dq feature 0, b " << b << " t " << t << " head " << h;
        actual[i] = expected[i];
      }
  gpu.dqkv = Tensor::from_floats(actual, gpu.dqkv.shape());
}

TEST_P(BatchedAttentionGpu, MatchesCpu) {
  const BatchedCase c = GetParam();
  Rng rng(test_seed());
  const BatchedInputs in = test::random_batched_inputs(c, rng);
  BatchedResult gpu = test::run_batched(in, c, kGpu);
  const BatchedResult cpu = test::run_batched(in, c, Device::cpu());
  const double ulp = 2 * test::unit_roundoff(c.dtype);
  EXPECT_TRUE(test::causal_rows_sum_to_one(gpu.probs, c.dtype));
  EXPECT_TRUE(test::all_close("probs", gpu.probs, cpu.probs, {ulp, 0}));
  EXPECT_TRUE(test::all_close("out", gpu.out, cpu.out, {ulp, ulp}));
  if (c.key_offset != 0.0f) check_and_set_aside_shifted_feature(in, cpu, gpu, c);
  EXPECT_TRUE(test::all_close("dqkv", gpu.dqkv, cpu.dqkv, {ulp, ulp}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchedAttentionGpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name(); });

// The backward adds into dqkv: from random values it ends at those values plus the gradient from zero, each sum
// rounded once more.
TEST(BatchedAttentionGpuAccumulation, BackwardAddsIntoDqkv) {
  LAB_REQUIRE_GPU();
  const BatchedCase c{2, 37, 2, 16, DType::BF16};
  Rng rng(test_seed());
  BatchedInputs in = test::random_batched_inputs(c, rng);
  const std::vector<float> before = in.dqkv_before.to_floats();
  const Tensor added = test::run_batched(in, c, kGpu).dqkv;
  in.dqkv_before = Tensor::zeros(in.qkv.shape(), DType::F32);
  const std::vector<float> alone = test::run_batched(in, c, kGpu).dqkv.to_floats();
  std::vector<float> sum(alone.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = before[i] + alone[i];
  const double u = test::unit_roundoff(c.dtype);
  EXPECT_TRUE(test::all_close("dqkv", added, Tensor::from_floats(sum, in.qkv.shape()), {u, u}));
}

// GradWrite::Overwrite: from a dqkv of NaNs, the products into dqkv run with beta = 0, reading none of it: as adding
// into zeros (within one rounding: the product may be summed by another algorithm), bf16 and the f32 op.
TEST(BatchedAttentionGpuAccumulation, OverwriteWritesEveryElementAsAddingIntoZeros) {
  LAB_REQUIRE_GPU();
  for (const DType dtype : {DType::BF16, DType::F32}) {
    const BatchedCase c{2, 37, 2, 16, dtype};
    const double u = dtype == DType::F32 ? 1e-5 : test::unit_roundoff(dtype);
    EXPECT_TRUE(test::overwrite_matches_adding_into_zeros(c, test_seed(), kGpu, u)) << c.name();
  }
}

// f32 is the f32 op (attention.cu): the CPU's f32 results within f32's tolerance for sums of T terms.
TEST(BatchedAttentionGpuF32, IsTheF32Attention) {
  LAB_REQUIRE_GPU();
  const BatchedCase c{2, 37, 3, 16, DType::F32};
  Rng rng(test_seed());
  const BatchedInputs in = test::random_batched_inputs(c, rng);
  const BatchedResult gpu = test::run_batched(in, c, kGpu), cpu = test::run_f32_attention(in, c);
  const Tolerance tol = tolerance_for(DType::F32, c.T);
  EXPECT_TRUE(test::all_close("probs", gpu.probs, cpu.probs, tol));
  EXPECT_TRUE(test::all_close("out", gpu.out, cpu.out, tol));
  EXPECT_TRUE(test::all_close("dqkv", gpu.dqkv, cpu.dqkv, tol));
}

}  // namespace
}  // namespace lab
