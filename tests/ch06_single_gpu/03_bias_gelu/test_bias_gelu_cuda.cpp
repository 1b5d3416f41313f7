// Lab 03 on the GPU: v1 (separate kernels) and v2 (fused, float4 or scalar) against the CPU reference, forward
// and backward, at odd shapes; v1-v3 of the problem with the GEMM (v3: cuBLASLt's bias + GELU epilogue); GELU's
// tails against double precision; dbias's bits repeatable. Labels ch06 and cuda: they run in the emulation
// build and skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>

#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_lab.h"
#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_versions.h"
#include "common/cuda/cublas.h"
#include "tests/ch06_single_gpu/03_bias_gelu/gelu_tails.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/common/cuda/gpu_test.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

using test::kGpu;

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

struct LabCase {
  int64_t N, OC, C;
  std::string name() const { return cat("N", N, "_OC", OC, "_C", C); }
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << c.name();
}

// Tiny; widths off float4 (1, 5, 1027: the scalar instance), multiples of 4 but not of 8 or 32 (4, 1028);
// widths past one block of 256 vectors (1028 columns: 257 vectors); rows making one chunk per row (1000 x 12)
// and chunks of two rows with a short last one (2113 x 8); GPT-2's width.
const LabCase kLabCases[] = {{1, 1, 1},     {3, 5, 7},     {7, 4, 33},   {33, 1027, 9},
                             {17, 1028, 4}, {1000, 12, 5}, {2113, 8, 3}, {5, 3072, 64}};

class BiasGeluLabGpu : public ::testing::TestWithParam<LabCase> {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    cuda::set_tf32(false);
  }
};

TEST_P(BiasGeluLabGpu, EveryVersionMatchesCpu) {
  const LabCase p = GetParam();
  for (const auto& [pass, count] : {std::pair{ch06::BiasGeluPass::Forward, 2u},
                                    {ch06::BiasGeluPass::Backward, 2u},
                                    {ch06::BiasGeluPass::LinearForward, 3u}}) {
    const kernel_lab::KernelLab lab = ch06::make_bias_gelu_lab({p.N, p.OC, p.C, 3.0f, test_seed()}, pass);
    const std::vector<int> gpu = test::versions_on(lab, DeviceType::CUDA);
    ASSERT_EQ(gpu.size(), count) << lab.name();
    for (const int n : gpu) EXPECT_TRUE(test::version_passes(lab, n));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasGeluLabGpu, ::testing::ValuesIn(kLabCases),
                         [](const auto& info) { return info.param.name(); });

// v2 in both widths: 97 columns take single floats, 100 columns float4.
TEST(BiasGeluGpuTails, FusedKernelsMatchDoublePrecision) {
  LAB_REQUIRE_GPU();
  for (const int64_t columns : {97, 100}) {
    test::expect_gelu_matches_double(
        kGpu, columns,
        [](const Tensor& out, const Tensor& x, const Tensor& b) { ch06::bias_gelu::forward_v2(out, x, b); },
        [](const Tensor& dx, const Tensor& x, const Tensor& b, const Tensor& dout) {
          ch06::bias_gelu::backward_v2(dx, Tensor::zeros(b.shape(), DType::F32, kGpu), dout, x, b);
        });
  }
}

TEST(BiasGeluGpuTails, SeparateKernelsMatchDoublePrecision) {
  LAB_REQUIRE_GPU();
  test::expect_gelu_matches_double(
      kGpu, 97,
      [](const Tensor& out, const Tensor& x, const Tensor& b) {
        ch06::bias_gelu::forward_v1(out, Tensor::empty(x.shape(), DType::F32, kGpu), x, b);
      },
      [](const Tensor& dx, const Tensor& x, const Tensor& b, const Tensor& dout) {
        ch06::bias_gelu::backward_v1(dx, Tensor::zeros(b.shape(), DType::F32, kGpu), dout, x);  // pre = x + 0
      });
}

// Tensors that are not 16-byte aligned (views one float into their buffers) take the scalar instance.
TEST(BiasGeluGpuLayout, UnalignedTensorsMatchCpu) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const int64_t N = 9, OC = 64;
  const auto unaligned = [](const Tensor& t) {
    const Tensor view = Tensor::empty({t.numel() + 1}, DType::F32, kGpu).view(1, t.shape());
    view.copy_from(t);
    return view;
  };
  const Tensor x = test::random_normal({N, OC}, rng, 3.0f), bias = test::random_normal({OC}, rng);
  const Tensor dout = test::random_normal({N, OC}, rng);
  const Tensor out = Tensor::empty({N, OC}, DType::F32), dx = Tensor::empty({N, OC}, DType::F32);
  const Tensor dbias = Tensor::zeros({OC}, DType::F32);
  ch06::bias_gelu::cpu_forward_fused(out, x, bias);
  ch06::bias_gelu::cpu_backward_fused(dx, dbias, dout, x, bias);
  const Tensor out_gpu = unaligned(Tensor::zeros({N, OC}, DType::F32)),
               dx_gpu = unaligned(Tensor::zeros({N, OC}, DType::F32));
  const Tensor dbias_gpu = Tensor::zeros({OC}, DType::F32, kGpu);
  ch06::bias_gelu::forward_v2(out_gpu, unaligned(x), unaligned(bias));
  ch06::bias_gelu::backward_v2(dx_gpu, dbias_gpu, unaligned(dout), unaligned(x), unaligned(bias));
  for (const auto& [name, actual, expected, tol] : {std::tuple{"out", out_gpu, out, tolerance_for(DType::F32, 1)},
                                                    {"dx", dx_gpu, dx, tolerance_for(DType::F32, 1)},
                                                    {"dbias", dbias_gpu, dbias, tolerance_for(DType::F32, N)}}) {
    const CloseReport r = compare_close(actual, expected, tol);
    EXPECT_TRUE(r.ok()) << r.describe(name);
  }
}

// More rows than a grid's y dimension holds (65535): the forward's blocks walk the rows beyond it.
TEST(BiasGeluGpuLayout, RowsBeyondTheGridLimit) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const int64_t N = 65537, OC = 4;
  const Tensor x = test::random_normal({N, OC}, rng, 3.0f), bias = test::random_normal({OC}, rng);
  const Tensor out = Tensor::empty({N, OC}, DType::F32);
  ch06::bias_gelu::cpu_forward_fused(out, x, bias);
  const Tensor out_gpu = Tensor::empty({N, OC}, DType::F32, kGpu);
  out_gpu.fill_(std::nanf(""));
  ch06::bias_gelu::forward_v2(out_gpu, x.to(kGpu), bias.to(kGpu));
  const CloseReport r = compare_close(out_gpu, out, tolerance_for(DType::F32, 1));
  EXPECT_TRUE(r.ok()) << r.describe("out");
}

// No atomics and a fixed order of additions: two runs give the same bits.
TEST(BiasGeluGpuSums, DbiasIsBitwiseRepeatable) {
  LAB_REQUIRE_GPU();
  Rng rng(test_seed());
  const int64_t N = 3000, OC = 1028;
  const Tensor x = test::random_normal({N, OC}, rng, 3.0f).to(kGpu), bias = test::random_normal({OC}, rng).to(kGpu);
  const Tensor dout = test::random_normal({N, OC}, rng).to(kGpu), dx = Tensor::empty({N, OC}, DType::F32, kGpu);
  std::vector<float> runs[2];
  for (std::vector<float>& run : runs) {
    const Tensor dbias = Tensor::zeros({OC}, DType::F32, kGpu);
    ch06::bias_gelu::backward_v2(dx, dbias, dout, x, bias);
    run = dbias.to_floats();
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace lab
