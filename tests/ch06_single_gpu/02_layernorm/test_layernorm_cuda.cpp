// Lab 02 on the GPU: every GPU version (v1-v4) of the lab against the CPU reference, forward and backward, at
// odd shapes and with rows far from zero; ch06::fused_residual_layernorm on CUDA with optional and aliased
// gradients, with the shapes that take the core's unfused fallback, and with repeatable weight gradients.
// Labels ch06 and cuda: they run in the emulation build and skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_lab.h"
#include "tests/ch06_single_gpu/02_layernorm/fused_op_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using test::FusedInputs;
using test::GradientSet;
using test::kGpu;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// ================================================================ the lab's GPU versions

struct LabCase {
  int64_t N, C;
  float offset;
  std::string name() const { return cat("N", N, "_C", C, offset != 0.0f ? "_far" : ""); }
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << c.name();
}

// v3 holds rows of C = 4k <= 1664 in registers (v4 then falls back to the core's ops).
bool v3_takes(int64_t C) {
  return C % 4 == 0 && C <= 1664;
}

// Tiny; widths off the warp (31, 33), off float4 (7, 1001), multiples of 4 but not of 32 or 128 (4, 36, 772),
// GPT-2's (768, 1600), the widest register row (1664) and one past it (1668); rows off the 8 rows of a forward
// block and off the backward's split (9, 2113: 9 rows per block, a short last block); rows with mean 1e4.
const LabCase kLabCases[] = {{1, 1, 0},     {1, 4, 0},    {5, 7, 0},       {9, 33, 0},     {3, 36, 0},     {65, 31, 0},
                             {33, 768, 0},  {17, 772, 0}, {9, 1600, 0},    {3, 1664, 0},   {2, 1668, 0},   {4, 1001, 0},
                             {2113, 20, 0}, {5, 7, 1e4f}, {33, 768, 1e4f}, {17, 36, 1e4f}, {9, 1600, 1e4f}};

class LayerNormLabGpu : public ::testing::TestWithParam<LabCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(LayerNormLabGpu, EveryVersionMatchesCpu) {
  const LabCase p = GetParam();
  for (const ch06::LabPass pass : {ch06::LabPass::Forward, ch06::LabPass::Backward}) {
    const kernel_lab::KernelLab lab = ch06::make_layernorm_lab({p.N, p.C, p.offset, 1.0f, test_seed()}, pass);
    const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
    ASSERT_EQ(gpu.size(), 4u) << "v1-v4";
    for (const int n : gpu) {
      if (n == 3 && !v3_takes(p.C)) {  // refused, with an error saying why
        const kernel_lab::Validation v = lab.validate_all({n}).front();
        EXPECT_FALSE(v.passed);
        EXPECT_NE(v.error.find("is not supported"), std::string::npos) << v.describe();
        continue;
      }
      EXPECT_TRUE(test::version_passes(lab, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormLabGpu, ::testing::ValuesIn(kLabCases),
                         [](const auto& info) { return info.param.name(); });

// ================================================================ the fused op

class FusedOpGpu : public ::testing::TestWithParam<GradientSet> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

// The register-row kernels (C = 768, 36), the fallback to the core's ops (C = 7, 1668), and no rows at all.
TEST_P(FusedOpGpu, MatchesUnfusedOps) {
  Rng rng(test_seed());
  for (const auto& [N, C] : {std::pair<int64_t, int64_t>{70, 768}, {130, 36}, {9, 7}, {3, 1668}, {0, 768}}) {
    const FusedInputs in = test::random_fused_inputs(N, C, 3.0f, rng);
    test::expect_results_close(test::run_fused(in, GetParam(), kGpu), test::run_unfused_reference(in, GetParam()),
                               tolerance_for(DType::F32, std::max(N, C)));
  }
}

INSTANTIATE_TEST_SUITE_P(Gradients, FusedOpGpu, ::testing::ValuesIn(test::gradient_sets()),
                         [](const auto& info) { return info.param.name(); });

// Rows that are not 16-byte aligned (views one float into their buffers) cannot take float4 loads: the op
// must notice and take the fallback, not fault or read across rows.
TEST(FusedOpGpuLayout, UnalignedRowsMatchCpu) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const int64_t N = 33, C = 768;
  const FusedInputs in = test::random_fused_inputs(N, C, 0.0f, rng);
  const auto unaligned = [&](const Tensor& t) {
    const Tensor buffer = Tensor::empty({t.numel() + 1}, DType::F32, kGpu);
    const Tensor view = buffer.view(1, t.shape());
    view.copy_from(t);
    return view;
  };
  const Tensor residual = unaligned(Tensor::zeros({N, C}, DType::F32)),
               out = unaligned(Tensor::zeros({N, C}, DType::F32));
  const Tensor mean = Tensor::empty({N}, DType::F32, kGpu), rstd = Tensor::empty({N}, DType::F32, kGpu);
  const Tensor weight = in.weight.to(kGpu);
  ch06::fused_residual_layernorm_forward(residual, out, mean, rstd, unaligned(in.a), unaligned(in.b), weight,
                                         in.bias.to(kGpu));
  const Tensor da = unaligned(in.da), db = unaligned(in.db);
  const Tensor dweight = in.dweight.to(kGpu), dbias = in.dbias.to(kGpu);
  ch06::fused_residual_layernorm_backward(da, db, dweight, dbias, unaligned(in.dresidual), unaligned(in.dout), residual,
                                          weight, mean, rstd);
  const test::FusedResults expected = test::run_unfused_reference(in, {});
  test::expect_results_close({residual, out, mean, rstd, da, db, dweight, dbias}, expected,
                             tolerance_for(DType::F32, std::max(N, C)));
}

// With no rows, the parameters' gradients written over are zeros (fused_op_cases.h).
TEST(FusedOpGpuNoRows, ParameterGradientsWrittenOverAreZeros) {
  LAB_REQUIRE_GPU();
  test::expect_no_rows_give_zero_param_grads(kGpu);
}

// No atomics and a fixed order of additions: two runs give the same bits, at a shape with many blocks.
TEST(FusedOpGpuSums, WeightGradientsAreBitwiseRepeatable) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FusedInputs in = test::random_fused_inputs(4099, 768, 0.0f, rng);
  const test::FusedResults first = test::run_fused(in, {}, kGpu);
  const test::FusedResults second = test::run_fused(in, {}, kGpu);
  EXPECT_EQ(first.dweight.to_floats(), second.dweight.to_floats());
  EXPECT_EQ(first.dbias.to_floats(), second.dbias.to_floats());
}

TEST(FusedOpGpuErrors, TensorsOnTwoDevicesAreRefused) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const FusedInputs in = test::random_fused_inputs(4, 8, 0.0f, rng);
  const Tensor residual = Tensor::empty({4, 8}, DType::F32, kGpu), out = Tensor::empty({4, 8}, DType::F32, kGpu);
  const Tensor mean = Tensor::empty({4}, DType::F32, kGpu), rstd = Tensor::empty({4}, DType::F32, kGpu);
  testing::expect_error(
      [&] {
        ch06::fused_residual_layernorm_forward(residual, out, mean, rstd, in.a.to(kGpu), in.b, in.weight.to(kGpu),
                                               in.bias.to(kGpu));
      },
      ErrorKind::InvalidArgument, {"different devices"});
}

}  // namespace
}  // namespace lab
