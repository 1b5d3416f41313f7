// common/ops/cuda/warpgroup_mma.cuh, one warpgroup: wgmma m64nNk16 (N = 64, 128) with A from shared memory or
// from registers, B stored K-major or N-major, accumulating into C or not, each operand's core matrices placed by
// strides that differ between the two descriptor fields (and with gaps between core matrices), against a plain CPU
// product, in bf16 and f16. The data are random and not symmetric, so an operand read transposed, a stride taken
// for the other, or a register in the wrong place fails (checked: those products differ). Labels ch09 and cuda: in
// the emulation build this checks the emulated layouts against the PTX ISA's; on a Hopper GPU, with the test built
// for sm_90a, the same test checks the hardware; elsewhere it skips.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/util/rng.h"
#include "tests/ch09_advanced/warpgroup_mma_kernels.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

using test::kGpu;
using test::WarpgroupOperands;

constexpr int kM = 64, kK = 16;
using Matrix = std::vector<float>;  // row-major

Matrix random_matrix(Rng& rng, int rows, int cols, DType dtype) {
  Matrix m(static_cast<size_t>(rows) * cols);
  for (float& v : m) v = rng.normal();
  return Tensor::from_floats(m, {rows, cols}).to_dtype(dtype).to_floats();
}

// a [64, 16] b [16, n] (+ c) in double; the bound a few f32 roundings of the sum of |terms|.
struct Expected {
  std::vector<double> value, bound;
};
Expected product(const Matrix& a, const Matrix& b, const Matrix& c, int n, bool accumulate) {
  Expected e{std::vector<double>(static_cast<size_t>(kM) * n), std::vector<double>(static_cast<size_t>(kM) * n)};
  for (int m = 0; m < kM; ++m)
    for (int j = 0; j < n; ++j) {
      double sum = accumulate ? c[m * n + j] : 0.0, magnitude = std::fabs(sum);
      for (int k = 0; k < kK; ++k) {
        const double term = static_cast<double>(a[m * kK + k]) * b[k * n + j];
        sum += term;
        magnitude += std::fabs(term);
      }
      e.value[m * n + j] = sum;
      e.bound[m * n + j] = 1e-6 * (kK + 1) * magnitude + 1e-30;
    }
  return e;
}

int misses(const std::vector<float>& got, const Expected& expected) {
  int n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += !(std::fabs(got[i] - expected.value[i]) <= expected.bound[i]);
  return n;
}

// b [16, n] with its two 8-row halves swapped: what a k stride taken for the other would read.
Matrix halves_swapped(const Matrix& b, int n) {
  Matrix s(b.size());
  for (int k = 0; k < kK; ++k)
    for (int j = 0; j < n; ++j) s[k * n + j] = b[((k + 8) % kK) * n + j];
  return s;
}

// The strides of the layouts tried: the core matrices of the K dimension adjacent (LBO = 128 bytes), those of the
// rows adjacent (SBO = 128), and both with gaps (16 bytes between core matrices, 32 between their groups).
struct Strides {
  const char* name;
  uint32_t leading, stride;  // for an operand of `groups` core-matrix groups of 8 rows
};
std::vector<Strides> strides_for(int row_groups) {
  return {{"k-adjacent", 128, 256},
          {"rows-adjacent", static_cast<uint32_t>(128 * row_groups), 128},
          {"with-gaps", static_cast<uint32_t>(144 * row_groups + 32), 144}};
}

class WarpgroupMma : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    LAB_REQUIRE_GPU();
    if (!test::warpgroup_products_run_here()) GTEST_SKIP() << "wgmma needs a compute capability 9.0 GPU and sm_90a";
  }
};

TEST_P(WarpgroupMma, EveryOperandFormAndLayoutMatchesCpuProduct) {
  const DType dtype = GetParam();
  Rng rng(dtype == DType::BF16 ? 31 : 32);
  for (const int n : {64, 128}) {
    const Matrix a = random_matrix(rng, kM, kK, dtype), b = random_matrix(rng, kK, n, dtype);
    const Matrix c = random_matrix(rng, kM, n, DType::F32);
    const Tensor a_dev = Tensor::from_floats(a, {kM, kK}).to_dtype(dtype).to(kGpu);
    const Tensor b_dev = Tensor::from_floats(b, {kK, n}).to_dtype(dtype).to(kGpu);
    const Tensor c_dev = Tensor::from_floats(c, {kM, n}).to(kGpu);
    // The data tell the readings apart: B with its k halves swapped gives another product.
    const std::vector<double> swapped = product(a, halves_swapped(b, n), c, n, true).value;
    ASSERT_GT(misses(std::vector<float>(swapped.begin(), swapped.end()), product(a, b, c, n, true)), kM * n / 2);
    for (const bool a_in_registers : {false, true})
      for (const bool b_n_major : {false, true})
        for (const bool accumulate : {true, false})
          for (const Strides& as : strides_for(kM / 8))
            for (const Strides& bs : strides_for(n / 8)) {
              if (a_in_registers && as.leading != 128) continue;  // A's layout is not read
              WarpgroupOperands how;
              how.a_in_registers = a_in_registers;
              how.b_n_major = b_n_major;
              how.accumulate = accumulate;
              how.a_leading = as.leading, how.a_stride = as.stride, how.b_leading = bs.leading,
              how.b_stride = bs.stride;
              const Tensor d = Tensor::empty({kM, n}, DType::F32, kGpu);
              test::warpgroup_product(d, a_dev, b_dev, c_dev, how);
              EXPECT_EQ(misses(d.to_floats(), product(a, b, c, n, accumulate)), 0)
                  << "N " << n << ", A " << (a_in_registers ? "in registers" : "in shared memory, ") << as.name
                  << ", B " << (b_n_major ? "N" : "K") << "-major " << bs.name << (accumulate ? ", + C" : "");
            }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, WarpgroupMma, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return dtype_name(info.param); });

}  // namespace
}  // namespace lab
