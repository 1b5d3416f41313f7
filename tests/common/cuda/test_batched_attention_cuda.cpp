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
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/common/cuda/gpu_test.h"
#include "tests/common/cuda/op_check.h"
#include "tests/common/ops/batched_attention_cases.h"

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

TEST_P(BatchedAttentionGpu, MatchesCpu) {
  const BatchedCase c = GetParam();
  Rng rng(test_seed());
  const BatchedInputs in = test::random_batched_inputs(c, rng);
  const BatchedResult gpu = test::run_batched(in, c, kGpu);
  const BatchedResult cpu = test::run_batched(in, c, Device::cpu());
  const double ulp = 2 * test::unit_roundoff(c.dtype);
  EXPECT_TRUE(test::causal_rows_sum_to_one(gpu.probs, c.dtype));
  EXPECT_TRUE(test::all_close("probs", gpu.probs, cpu.probs, {ulp, 0}));
  EXPECT_TRUE(test::all_close("out", gpu.out, cpu.out, {ulp, ulp}));
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
