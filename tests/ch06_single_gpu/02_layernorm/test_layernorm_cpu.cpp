// Lab 02 on the CPU: the lab's CPU versions against the reference at odd shapes and with rows far from zero,
// and ch06::fused_residual_layernorm's CPU path: optional and aliased gradients against the core's unfused
// ops, the same bits whatever the thread count, and clear errors for bad arguments.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <string>

#include "ch06_single_gpu/fused_residual_layernorm.h"
#include "ch06_single_gpu/kernels/02_layernorm/layernorm_lab.h"
#include "tests/ch06_single_gpu/02_layernorm/fused_op_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/expect_error.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::FusedInputs;
using test::GradientSet;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// ================================================================ the lab's CPU versions

struct LabCase {
  int64_t N, C;
  float offset;
  std::string name() const { return cat("N", N, "_C", C, offset != 0.0f ? "_far" : ""); }
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << c.name();
}

// Tiny, odd (not multiples of 4, 8 or 32), just off the backward's chunk of 64 rows, GPT-2's widths; rows with
// mean 1e4 and std 1, where a one-pass variance would cancel to noise.
const LabCase kLabCases[] = {{1, 1, 0},    {5, 7, 0},     {9, 33, 0},   {65, 31, 0},    {33, 768, 0},
                             {129, 96, 0}, {17, 1600, 0}, {5, 7, 1e4f}, {65, 33, 1e4f}, {33, 768, 1e4f}};

class LayerNormLabCpu : public ::testing::TestWithParam<LabCase> {};

TEST_P(LayerNormLabCpu, CpuVersionsMatchReference) {
  const LabCase p = GetParam();
  for (const ch06::LabPass pass : {ch06::LabPass::Forward, ch06::LabPass::Backward}) {
    const kernel_lab::KernelLab lab = ch06::make_layernorm_lab({p.N, p.C, p.offset, 1.0f, test_seed()}, pass);
    const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
    ASSERT_EQ(cpu.size(), 2u) << "the reference and the fused loop";
    for (const int n : cpu) EXPECT_TRUE(test::version_passes(lab, n));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormLabCpu, ::testing::ValuesIn(kLabCases),
                         [](const auto& info) { return info.param.name(); });

// ================================================================ the fused op

class FusedOpCpu : public ::testing::TestWithParam<GradientSet> {};

TEST_P(FusedOpCpu, MatchesUnfusedOps) {
  Rng rng(test_seed());
  for (const auto& [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {70, 37}, {130, 768}, {0, 37}}) {
    const FusedInputs in = test::random_fused_inputs(N, C, 3.0f, rng);
    test::expect_results_close(test::run_fused(in, GetParam(), Device::cpu()),
                               test::run_unfused_reference(in, GetParam()), tolerance_for(DType::F32, std::max(N, C)));
  }
}

INSTANTIATE_TEST_SUITE_P(Gradients, FusedOpCpu, ::testing::ValuesIn(test::gradient_sets()),
                         [](const auto& info) { return info.param.name(); });

// With no rows, the parameters' gradients written over are zeros (fused_op_cases.h).
TEST(FusedOpCpuNoRows, ParameterGradientsWrittenOverAreZeros) {
  test::expect_no_rows_give_zero_param_grads(Device::cpu());
}

// dweight and dbias are summed per chunk of rows, and the chunks in order: the thread count changes nothing.
TEST(FusedOpCpuSums, SameBitsWhateverTheThreadCount) {
  Rng rng(test_seed());
  const FusedInputs in = test::random_fused_inputs(1000, 96, 0.0f, rng);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const test::FusedResults one = test::run_fused(in, {}, Device::cpu());
  omp_set_num_threads(3);
  const test::FusedResults three = test::run_fused(in, {}, Device::cpu());
  omp_set_num_threads(threads);
  EXPECT_EQ(one.dweight.to_floats(), three.dweight.to_floats());
  EXPECT_EQ(one.dbias.to_floats(), three.dbias.to_floats());
  EXPECT_EQ(one.da.to_floats(), three.da.to_floats());
}

TEST(FusedOpCpuErrors, BadArgumentsAreClearErrors) {
  Rng rng(test_seed());
  const FusedInputs in = test::random_fused_inputs(6, 8, 0.0f, rng);
  const Tensor residual = Tensor::empty({6, 8}, DType::F32), out = Tensor::empty({6, 8}, DType::F32);
  const Tensor mean = Tensor::empty({6}, DType::F32), rstd = Tensor::empty({6}, DType::F32);
  using testing::expect_error;
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_forward(residual, out, mean, rstd, in.a, in.b, in.bias, in.weight.view(0, {7}));
      },
      ErrorKind::InvalidArgument, {"bias", "[8]", "[7]"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_forward(residual, out, mean, rstd, in.a, in.b.view(0, {6, 7}), in.weight,
                                               in.bias);
      },
      ErrorKind::InvalidArgument, {"fused_residual_layernorm b", "[6, 8]", "[6, 7]"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_forward(residual, out, mean.view(0, {5}), rstd, in.a, in.b, in.weight, in.bias);
      },
      ErrorKind::InvalidArgument, {"mean", "[6]", "[5]"});
  const Tensor ints = Tensor::zeros({6, 8}, DType::I32);
  expect_error(
      [&] { ch06::fused_residual_layernorm_forward(residual, out, mean, rstd, ints, in.b, in.weight, in.bias); },
      ErrorKind::InvalidArgument, {"fused_residual_layernorm_forward", "i32", "f32, bf16 or f16"});
  // 16-bit activations are taken, but all of one dtype; the f32 backward refuses them (16 bits run the through form).
  const Tensor a16 = in.a.to_dtype(DType::BF16), residual16 = residual.to_dtype(DType::BF16);
  expect_error(
      [&] { ch06::fused_residual_layernorm_forward(residual16, out, mean, rstd, a16, in.b, in.weight, in.bias); },
      ErrorKind::InvalidArgument, {"fused_residual_layernorm b", "bf16"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_backward(Tensor(), Tensor(), in.dweight, in.dbias, Tensor(),
                                                in.dout.to_dtype(DType::BF16), residual16, in.weight, mean, rstd);
      },
      ErrorKind::InvalidArgument, {"f32 activations", "fused_residual_layernorm_backward_through"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_backward_through(in.dresidual, ops::GradWrite::Add, in.da.view(0, {8, 6}),
                                                        in.dweight, in.dbias, in.dout, residual, in.weight, mean, rstd);
      },
      ErrorKind::InvalidArgument, {"dcopy", "[6, 8]", "[8, 6]"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_backward(in.da, in.db, in.dweight, in.dbias, in.dresidual.view(0, {8, 6}),
                                                in.dout, residual, in.weight, mean, rstd);
      },
      ErrorKind::InvalidArgument, {"dresidual", "[6, 8]", "[8, 6]"});
  expect_error(
      [&] {
        ch06::fused_residual_layernorm_backward(in.da, in.db, in.dweight, Tensor(), in.dresidual, in.dout, residual,
                                                in.weight, mean, rstd);
      },
      ErrorKind::InvalidArgument, {"undefined"});
}

}  // namespace
}  // namespace lab
