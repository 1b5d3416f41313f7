// Lab 03 on the CPU: the separate and fused passes against the reference at odd shapes, GELU's tails against
// double precision, and dbias's bits independent of the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <string>

#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_lab.h"
#include "ch06_single_gpu/kernels/03_bias_gelu/bias_gelu_versions.h"
#include "tests/ch06_single_gpu/03_bias_gelu/gelu_tails.h"
#include "tests/ch06_single_gpu/lab_versions.h"
#include "tests/support/test_support.h"

namespace lab {
namespace {

uint64_t test_seed() {
  return std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

struct LabCase {
  int64_t N, OC;
  std::string name() const { return cat("N", N, "_OC", OC); }
};

void PrintTo(const LabCase& c, std::ostream* os) {
  *os << c.name();
}

// Tiny, odd widths (not multiples of 4, 8 or 32), rows just off the chunk of 64 rows, GPT-2's width.
const LabCase kLabCases[] = {{1, 1}, {3, 5}, {7, 4}, {65, 33}, {129, 1027}, {63, 3072}};

class BiasGeluLabCpu : public ::testing::TestWithParam<LabCase> {};

TEST_P(BiasGeluLabCpu, CpuVersionsMatchReference) {
  const LabCase p = GetParam();
  for (const ch06::BiasGeluPass pass : {ch06::BiasGeluPass::Forward, ch06::BiasGeluPass::Backward}) {
    const kernel_lab::KernelLab lab = ch06::make_bias_gelu_lab({p.N, p.OC, 16, 3.0f, test_seed()}, pass);
    const std::vector<int> cpu = test::versions_on(lab, DeviceType::CPU);
    ASSERT_EQ(cpu.size(), 2u) << "separate and fused";
    for (const int n : cpu) EXPECT_TRUE(test::version_passes(lab, n));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BiasGeluLabCpu, ::testing::ValuesIn(kLabCases),
                         [](const auto& info) { return info.param.name(); });

TEST(BiasGeluCpuTails, FusedPassMatchesDoublePrecision) {
  test::expect_gelu_matches_double(
      Device::cpu(), 97,
      [](const Tensor& out, const Tensor& x, const Tensor& b) { ch06::bias_gelu::cpu_forward_fused(out, x, b); },
      [](const Tensor& dx, const Tensor& x, const Tensor& b, const Tensor& dout) {
        ch06::bias_gelu::cpu_backward_fused(dx, Tensor::zeros(b.shape(), DType::F32), dout, x, b);
      });
}

TEST(BiasGeluCpuTails, SeparatePassesMatchDoublePrecision) {
  test::expect_gelu_matches_double(
      Device::cpu(), 97,
      [](const Tensor& out, const Tensor& x, const Tensor& b) {
        ch06::bias_gelu::cpu_forward_separate(out, Tensor::empty(x.shape(), DType::F32), x, b);
      },
      [](const Tensor& dx, const Tensor& x, const Tensor& b, const Tensor& dout) {
        // pre = x + 0 = x
        ch06::bias_gelu::cpu_backward_separate(dx, Tensor::zeros(b.shape(), DType::F32), dout, x);
      });
}

// dbias is summed by fixed chunks of rows, the chunks in order: the thread count changes nothing.
TEST(BiasGeluCpuSums, SameBitsWhateverTheThreadCount) {
  Rng rng(test_seed());
  const int64_t N = 700, OC = 40;
  const Tensor x = test::random_normal({N, OC}, rng, 2.0f), bias = test::random_normal({OC}, rng);
  const Tensor dout = test::random_normal({N, OC}, rng), pre = Tensor::empty({N, OC}, DType::F32);
  ch06::bias_gelu::cpu_forward_separate(Tensor::empty({N, OC}, DType::F32), pre, x, bias);
  const int threads = omp_get_max_threads();
  std::vector<float> fused[2], separate[2];
  for (int run = 0; run < 2; ++run) {
    omp_set_num_threads(run == 0 ? 1 : 3);
    const Tensor dx = Tensor::empty({N, OC}, DType::F32);
    const Tensor db1 = Tensor::zeros({OC}, DType::F32), db2 = Tensor::zeros({OC}, DType::F32);
    ch06::bias_gelu::cpu_backward_fused(dx, db1, dout, x, bias);
    ch06::bias_gelu::cpu_backward_separate(dx, db2, dout, pre);
    fused[run] = db1.to_floats();
    separate[run] = db2.to_floats();
  }
  omp_set_num_threads(threads);
  EXPECT_EQ(fused[0], fused[1]);
  EXPECT_EQ(separate[0], separate[1]);
}

}  // namespace
}  // namespace lab
