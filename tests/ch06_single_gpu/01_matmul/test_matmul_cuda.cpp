// Lab 01 (matmul) on the GPU: every GPU version of the lab (v1-v13) against its reference at odd shapes: tiny,
// one off the 32 x 32 tiles (v1, v2), the 128 x 128 block tiles (v3, v4), the 64 x 64 x 32 WMMA tiles (v5),
// exact multiples of them, K and N multiples of 4 (v4's float4 path) and not (its scalar path), and A far from
// zero; ch06::matmul_bias_gelu on CUDA against fp64 and against its CPU path; device mismatch.
// Labels ch06 and cuda: they run in the emulation build and skip without a GPU.
#include <gtest/gtest.h>

#include "ch06_single_gpu/kernels/01_matmul/matmul_lab.h"
#include "ch06_single_gpu/matmul_bias_gelu.h"
#include "tests/ch06_single_gpu/01_matmul/matmul_op_cases.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

struct LabCase {
  int64_t M, N, K;
  float offset;
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << "M" << c.M << "_N" << c.N << "_K" << c.K << (c.offset != 0.0f ? "_far" : "");
}

const LabCase kLabCases[] = {{1, 1, 1, 0},      {2, 3, 5, 0},       {31, 33, 17, 0},     {33, 31, 9, 0},
                             {129, 130, 67, 0}, {129, 132, 68, 0},  {128, 128, 16, 0},   {64, 64, 32, 0},
                             {65, 65, 33, 0},   {257, 193, 130, 0}, {33, 36, 40, 100.0f}};

class MatmulLabGpu : public ::testing::TestWithParam<LabCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(MatmulLabGpu, EveryGpuVersionMatchesItsReference) {
  const LabCase c = GetParam();
  const kernel_lab::KernelLab lab = ch06::make_matmul_lab({c.M, c.N, c.K, c.offset, 5});
  const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
  ASSERT_EQ(gpu.size(), 13u);
  for (const int v : gpu) EXPECT_TRUE(test::version_passes(lab, v));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulLabGpu, ::testing::ValuesIn(kLabCases));

// ================================================================ the op on CUDA

class MatmulBiasGeluGpu : public ::testing::TestWithParam<test::MatmulOpCase> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(MatmulBiasGeluGpu, MatchesFp64) {
  test::check_matmul_op_case(GetParam(), test::kGpu, 11);
}

TEST_P(MatmulBiasGeluGpu, GeluGradientEpilogueMatchesFp64) {
  test::check_gelu_grad_case(GetParam(), test::kGpu, 12);
}

INSTANTIATE_TEST_SUITE_P(Cases, MatmulBiasGeluGpu, ::testing::ValuesIn(test::matmul_op_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(MatmulBiasGeluGpuArgs, TensorsOnTwoDevicesAreAClearError) {
  LAB_REQUIRE_GPU();
  const Tensor inp = Tensor::zeros({4, 8}, DType::F32), weight = Tensor::zeros({6, 8}, DType::F32, test::kGpu);
  const Tensor out = Tensor::zeros({4, 6}, DType::F32, test::kGpu);
  testing::expect_error([&] { ch06::matmul_bias_gelu(out, {}, inp, weight, {}); }, ErrorKind::InvalidArgument,
                        {"matmul_epilogue"});
}

}  // namespace
}  // namespace lab
