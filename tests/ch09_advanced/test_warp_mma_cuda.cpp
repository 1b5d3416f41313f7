// common/ops/cuda/warp_mma.cuh, one warp: ldmatrix (plain and .trans) from row-major and column-major storage,
// then mma.sync m16n8k16, against a plain CPU product, in bf16 and f16; and a product whose C fragments become
// the A fragment of the next one, as the flash kernels chain scores into probabilities. The data are random and
// not symmetric, so an operand read transposed, or a fragment register in the wrong place, fails (checked:
// the wrong product differs). Labels ch09 and cuda: in the emulation build this checks the emulated layouts
// against the PTX ISA's; on a GPU, the same test checks the hardware.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/core/tensor.h"
#include "common/lab/compare.h"
#include "common/util/rng.h"
#include "tests/ch09_advanced/warp_mma_kernels.h"
#include "tests/common/cuda/gpu_test.h"

namespace lab {
namespace {

using test::kGpu;
using test::Storage;

constexpr int kN = 16;
using Matrix = std::vector<float>;  // 16 x 16, row-major

// Random values rounded to `dtype` (so the CPU product sees what the GPU sees).
Matrix random_matrix(Rng& rng, DType dtype) {
  Matrix m(kN * kN);
  for (float& v : m) v = rng.normal();
  return Tensor::from_floats(m, {kN, kN}).to_dtype(dtype).to_floats();
}

Matrix transposed(const Matrix& m) {
  Matrix t(m.size());
  for (int r = 0; r < kN; ++r)
    for (int c = 0; c < kN; ++c) t[c * kN + r] = m[r * kN + c];
  return t;
}

Tensor on_gpu(const Matrix& m, DType dtype) {
  return Tensor::from_floats(m, {kN, kN}).to_dtype(dtype).to(kGpu);
}

// a b + c in double, and the bound on an f32 sum of those products: a few f32 roundings of sum |terms|.
struct Expected {
  std::vector<double> value, bound;
};
Expected product(const Matrix& a, const Matrix& b, const Matrix& c) {
  Expected e{std::vector<double>(kN * kN), std::vector<double>(kN * kN)};
  for (int m = 0; m < kN; ++m)
    for (int n = 0; n < kN; ++n) {
      double sum = c[m * kN + n], magnitude = std::fabs(c[m * kN + n]);
      for (int k = 0; k < kN; ++k) {
        sum += static_cast<double>(a[m * kN + k]) * b[k * kN + n];
        magnitude += std::fabs(static_cast<double>(a[m * kN + k]) * b[k * kN + n]);
      }
      e.value[m * kN + n] = sum;
      e.bound[m * kN + n] = 1e-6 * (kN + 1) * magnitude + 1e-30;
    }
  return e;
}

Matrix as_floats(const Expected& e) {
  return Matrix(e.value.begin(), e.value.end());
}

Matrix absolute(Matrix m) {
  for (float& v : m) v = std::fabs(v);
  return m;
}

// How many elements of `actual` miss `expected` by more than its bound.
int misses(const Tensor& actual, const Expected& expected) {
  const std::vector<float> got = actual.to_floats();
  int n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += std::fabs(got[i] - expected.value[i]) > expected.bound[i];
  return n;
}

class WarpMma : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { LAB_REQUIRE_GPU(); }
};

TEST_P(WarpMma, LdmatrixAndMmaMatchCpuProductForEveryStorage) {
  const DType dtype = GetParam();
  Rng rng(dtype == DType::BF16 ? 11 : 12);
  const Matrix a = random_matrix(rng, dtype), b = random_matrix(rng, dtype), c = random_matrix(rng, DType::F32);
  const Expected expected = product(a, b, c);
  // The data are not symmetric: reading A or B transposed would give another product.
  ASSERT_GT(misses(Tensor::from_floats(as_floats(product(transposed(a), b, c)), {kN, kN}), expected), kN * kN / 2);
  ASSERT_GT(misses(Tensor::from_floats(as_floats(product(a, transposed(b), c)), {kN, kN}), expected), kN * kN / 2);
  for (const Storage as : {Storage::RowMajor, Storage::ColumnMajor})
    for (const Storage bs : {Storage::RowMajor, Storage::ColumnMajor}) {
      const Tensor d = Tensor::empty({kN, kN}, DType::F32, kGpu);
      test::warp_product(d, on_gpu(as == Storage::RowMajor ? a : transposed(a), dtype), as,
                         on_gpu(bs == Storage::RowMajor ? b : transposed(b), dtype), bs,
                         Tensor::from_floats(c, {kN, kN}).to(kGpu));
      EXPECT_EQ(misses(d, expected), 0) << "A " << (as == Storage::RowMajor ? "row" : "column") << "-major, B "
                                        << (bs == Storage::RowMajor ? "row" : "column") << "-major";
    }
}

TEST_P(WarpMma, AccumulatorFragmentsChainIntoTheNextAFragment) {
  const DType dtype = GetParam();
  Rng rng(dtype == DType::BF16 ? 21 : 22);
  const Matrix a = random_matrix(rng, dtype), b = random_matrix(rng, dtype), b2 = random_matrix(rng, dtype);
  const Matrix zero(kN * kN, 0.0f);
  const Expected first = product(a, b, zero);
  // The first product rounded to 16 bits, as the kernel packs it. An f32 sum within f32 rounding of a 16-bit
  // rounding boundary may round the other way than the double one: allow one 16-bit step of one product.
  const Matrix first_rounded = Tensor::from_floats(as_floats(first), {kN, kN}).to_dtype(dtype).to_floats();
  Expected expected = product(first_rounded, b2, zero);
  const Expected magnitude = product(absolute(first_rounded), absolute(b2), zero);
  for (size_t i = 0; i < expected.bound.size(); ++i)
    expected.bound[i] += dtype_epsilon(dtype) * magnitude.value[i] / kN;
  const Tensor e = Tensor::empty({kN, kN}, DType::F32, kGpu);
  test::warp_chained_product(e, on_gpu(a, dtype), on_gpu(b, dtype), on_gpu(b2, dtype));
  EXPECT_EQ(misses(e, expected), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, WarpMma, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return dtype_name(info.param); });

}  // namespace
}  // namespace lab
