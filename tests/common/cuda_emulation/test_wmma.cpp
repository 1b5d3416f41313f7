// The WMMA stand-in (include/mma.h): products of every supported shape and layout against an exact
// reference, accumulator loads and stores in both layouts, elementwise work on fragments, several warps of a
// block each on its own tile, and the misuse the hardware does not forgive (a lane that exited, a partial
// warp, lanes that disagree on the operand or the function, a misaligned pointer or leading dimension), each
// a fault naming the kernel, the block and the thread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tests/common/cuda_emulation/emulation_test.h"

namespace lab::cuda::emu::test {
namespace {

using namespace nvcuda;

// ---------------------------------------------------------------- kernels

// Each warp w of the block computes its own tile: D_w = A_w B_w + C_w, with A_w m x K (K a multiple of k) as
// K / k products accumulated in one fragment. Matrices of warp w start at w * stride; A and B are stored in
// their fragments' layouts with leading dimensions lda and ldb; C is loaded and D stored in `c_layout`.
template <int m, int n, int k, typename T, typename LayoutA, typename LayoutB>
__global__ void tile_product_kernel(float* d, const T* a, const T* b, const float* c, int K, unsigned lda, unsigned ldb,
                                    unsigned ldc, int a_stride, int b_stride, int c_stride, wmma::layout_t c_layout) {
  const int warp = static_cast<int>(threadIdx.x) / warpSize;
  a += warp * a_stride;
  b += warp * b_stride;
  wmma::fragment<wmma::matrix_a, m, n, k, T, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, m, n, k, T, LayoutB> fb;
  wmma::fragment<wmma::accumulator, m, n, k, float> acc;
  wmma::load_matrix_sync(acc, c + warp * c_stride, ldc, c_layout);
  const bool a_rows = std::is_same_v<LayoutA, wmma::row_major>, b_rows = std::is_same_v<LayoutB, wmma::row_major>;
  for (int kk = 0; kk < K; kk += k) {
    wmma::load_matrix_sync(fa, a + (a_rows ? kk : kk * lda), lda);
    wmma::load_matrix_sync(fb, b + (b_rows ? kk * ldb : kk), ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(d + warp * c_stride, acc, ldc, c_layout);
}

// ---------------------------------------------------------------- host side

// A row-major or column-major matrix of values exact in bf16 and fp16 (multiples of 1/8 in [-8, 8]): every
// product and every sum below is exact in float, so the stand-in must match the reference bit for bit.
struct Stored {
  std::vector<float> logical;  // rows x cols, row-major
  std::vector<float> memory;   // as stored, with its leading dimension
};

Stored random_matrix(int rows, int cols, bool row_major, int ld, std::mt19937& rng) {
  std::uniform_int_distribution<int> eighths(-64, 64);
  Stored s{std::vector<float>(static_cast<size_t>(rows) * cols),
           std::vector<float>(static_cast<size_t>(row_major ? rows : cols) * ld, 0.0f)};
  for (int r = 0; r < rows; ++r)
    for (int col = 0; col < cols; ++col) {
      const float v = static_cast<float>(eighths(rng)) / 8.0f;
      s.logical[static_cast<size_t>(r) * cols + col] = v;
      s.memory[row_major ? static_cast<size_t>(r) * ld + col : static_cast<size_t>(col) * ld + r] = v;
    }
  return s;
}

template <typename T>
std::vector<T> to(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

using Wmma = EmulationTest;

// D = A B + C for `warps` warps, each on its own matrices, checked element by element.
template <int m, int n, int k, typename T, typename LayoutA, typename LayoutB>
void check_tile_products(int K, int warps, wmma::layout_t c_layout) {
  constexpr bool a_rows = std::is_same_v<LayoutA, wmma::row_major>, b_rows = std::is_same_v<LayoutB, wmma::row_major>;
  // Leading dimensions with padding (multiples of 16 bytes), as tiles in shared memory have.
  const int lda = (a_rows ? K : m) + 8, ldb = (b_rows ? n : K) + 8, ldc = (c_layout == wmma::mem_row_major ? n : m) + 4;
  std::mt19937 rng(static_cast<unsigned>(m * 1000 + n * 10 + K));
  std::vector<float> a_mem, b_mem, c_mem, expected;
  for (int w = 0; w < warps; ++w) {
    const Stored a = random_matrix(m, K, a_rows, lda, rng);
    const Stored b = random_matrix(K, n, b_rows, ldb, rng);
    const Stored c = random_matrix(m, n, c_layout == wmma::mem_row_major, ldc, rng);
    a_mem.insert(a_mem.end(), a.memory.begin(), a.memory.end());
    b_mem.insert(b_mem.end(), b.memory.begin(), b.memory.end());
    c_mem.insert(c_mem.end(), c.memory.begin(), c.memory.end());
    for (int r = 0; r < m; ++r)
      for (int col = 0; col < n; ++col) {
        double sum = c.logical[static_cast<size_t>(r) * n + col];
        for (int i = 0; i < K; ++i)
          sum += static_cast<double>(a.logical[static_cast<size_t>(r) * K + i]) *
                 b.logical[static_cast<size_t>(i) * n + col];
        expected.push_back(static_cast<float>(sum));
      }
  }
  const int a_stride = static_cast<int>(a_mem.size()) / warps, b_stride = static_cast<int>(b_mem.size()) / warps;
  const int c_stride = static_cast<int>(c_mem.size()) / warps;
  DeviceBuffer<T> a_dev(to<T>(a_mem)), b_dev(to<T>(b_mem));
  DeviceBuffer<float> c_dev(c_mem), d_dev(c_mem.size());
  ASSERT_EQ(launch(tile_product_kernel<m, n, k, T, LayoutA, LayoutB>, 1, warps * 32, 0, nullptr, d_dev.get(),
                   a_dev.get(), b_dev.get(), c_dev.get(), K, unsigned(lda), unsigned(ldb), unsigned(ldc), a_stride,
                   b_stride, c_stride, c_layout),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> d = d_dev.download();
  for (int w = 0; w < warps; ++w)
    for (int r = 0; r < m; ++r)
      for (int col = 0; col < n; ++col) {
        const size_t at =
            c_layout == wmma::mem_row_major ? static_cast<size_t>(r) * ldc + col : static_cast<size_t>(col) * ldc + r;
        ASSERT_EQ(d[static_cast<size_t>(w) * c_stride + at], expected[(static_cast<size_t>(w) * m + r) * n + col])
            << "warp " << w << ", element (" << r << ", " << col << ")";
      }
}

TEST_F(Wmma, EveryShapeMultipliesExactly) {
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::row_major, wmma::row_major>(16, 1, wmma::mem_row_major);
  check_tile_products<32, 8, 16, __nv_bfloat16, wmma::row_major, wmma::row_major>(16, 1, wmma::mem_row_major);
  check_tile_products<8, 32, 16, __nv_bfloat16, wmma::row_major, wmma::row_major>(16, 1, wmma::mem_row_major);
  check_tile_products<16, 16, 16, __half, wmma::row_major, wmma::row_major>(16, 1, wmma::mem_row_major);
}

TEST_F(Wmma, EveryLayoutOfTheInputsAndTheAccumulator) {
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::col_major, wmma::row_major>(16, 1, wmma::mem_row_major);
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::row_major, wmma::col_major>(16, 1, wmma::mem_row_major);
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::col_major, wmma::col_major>(16, 1, wmma::mem_col_major);
  check_tile_products<32, 8, 16, __half, wmma::col_major, wmma::col_major>(16, 1, wmma::mem_col_major);
}

TEST_F(Wmma, ProductsAccumulateAlongKInOneFragment) {
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::row_major, wmma::row_major>(64, 1, wmma::mem_row_major);
  check_tile_products<8, 32, 16, __nv_bfloat16, wmma::row_major, wmma::col_major>(48, 1, wmma::mem_col_major);
}

TEST_F(Wmma, EachWarpOfABlockWorksOnItsOwnTile) {
  check_tile_products<16, 16, 16, __nv_bfloat16, wmma::row_major, wmma::row_major>(32, 4, wmma::mem_row_major);
}

// Elementwise work on x[] (here: a scale, then a ReLU), between the product and the store.
__global__ void scaled_relu_kernel(float* out, const __nv_bfloat16* a, const __nv_bfloat16* b) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = acc.x[i] > 0.0f ? 2.0f * acc.x[i] : 0.0f;
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

TEST_F(Wmma, ElementwiseWorkOnFragmentsReachesEveryElement) {
  static_assert(wmma::fragment<wmma::accumulator, 16, 16, 16, float>::num_elements * 32 == 256);
  std::mt19937 rng(7);
  const Stored a = random_matrix(16, 16, true, 16, rng), b = random_matrix(16, 16, true, 16, rng);
  DeviceBuffer<__nv_bfloat16> a_dev(to<__nv_bfloat16>(a.memory)), b_dev(to<__nv_bfloat16>(b.memory));
  DeviceBuffer<float> out(256);
  ASSERT_EQ(launch(scaled_relu_kernel, 1, 32, 0, nullptr, out.get(), a_dev.get(), b_dev.get()), cudaSuccess);
  const std::vector<float> got = out.download();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) {
      float sum = 0;
      for (int i = 0; i < 16; ++i) sum += a.logical[r * 16 + i] * b.logical[i * 16 + c];
      EXPECT_EQ(got[r * 16 + c], sum > 0 ? 2 * sum : 0.0f) << "(" << r << ", " << c << ")";
    }
}

// ---------------------------------------------------------------- misuse

// The kind of misuse each launch of misuse_kernel commits.
enum Misuse : int {
  kNone,
  kLaneExits,
  kLanesDisagreeOnThePointer,
  kMisalignedPointer,
  kBadLeadingDimension,
  kHalfWarpStores
};

__global__ void misuse_kernel(float* out, const __nv_bfloat16* a, int misuse) {
  __align__(32) __shared__ __nv_bfloat16 tile[2][16 * 16];
  const unsigned lane = threadIdx.x % 32;
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x) tile[0][i] = tile[1][i] = a[i];
  __syncthreads();
  if (misuse == kLaneExits && lane == 5) return;
  const __nv_bfloat16* source = tile[0];
  unsigned ldm = 16;
  if (misuse == kLanesDisagreeOnThePointer && lane >= 16) source = tile[1];
  if (misuse == kMisalignedPointer) source = tile[0] + 8;  // 16 bytes in: not 32-byte aligned
  if (misuse == kBadLeadingDimension) ldm = 12;            // 24 bytes: not a multiple of 16
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  if (misuse == kHalfWarpStores && lane >= 16) {
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
    return;
  }
  wmma::load_matrix_sync(fa, source, ldm);
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

class WmmaMisuse : public EmulationTest {
 protected:
  std::string run(Misuse misuse, unsigned threads = 32) {
    std::vector<float> values(256, 1.0f);
    DeviceBuffer<__nv_bfloat16> a(to<__nv_bfloat16>(values));
    DeviceBuffer<float> out(256);
    launch_faulting("misuse_kernel", misuse_kernel, 1, threads, out.get(), a.get(), static_cast<int>(misuse));
    return expect_fault(cudaErrorLaunchFailure, {"kernel misuse_kernel", "block (0,0,0)", "thread ("});
  }
};

TEST_F(WmmaMisuse, TheKernelWithoutMisuseRuns) {
  std::vector<float> values(256, 1.0f);
  DeviceBuffer<__nv_bfloat16> a(to<__nv_bfloat16>(values));
  DeviceBuffer<float> out(256);
  ASSERT_EQ(launch(misuse_kernel, 1, 64, 0, nullptr, out.get(), a.get(), static_cast<int>(kNone)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out.download(), std::vector<float>(256, 0.0f));
}

TEST_F(WmmaMisuse, ALaneThatExitsBeforeTheWarpsLoadIsAFault) {
  const std::string fault = run(kLaneExits);
  EXPECT_NE(fault.find("nvcuda::wmma::load_matrix_sync(mask 0xffffffff)"), std::string::npos) << fault;
  EXPECT_NE(fault.find("exited"), std::string::npos) << fault;
}

TEST_F(WmmaMisuse, APartialWarpIsAFault) {
  const std::string fault = run(kNone, 48);  // warp 1 has 16 lanes
  EXPECT_NE(fault.find("nvcuda::wmma::load_matrix_sync(mask 0xffffffff) includes lane 16, which does not exist"),
            std::string::npos)
      << fault;
}

TEST_F(WmmaMisuse, LanesThatPassDifferentPointersAreAFault) {
  const std::string fault = run(kLanesDisagreeOnThePointer);
  EXPECT_NE(fault.find("nvcuda::wmma::load_matrix_sync: lane 16 passes pointer"), std::string::npos) << fault;
  EXPECT_NE(fault.find("every lane of the warp must pass the same"), std::string::npos) << fault;
}

TEST_F(WmmaMisuse, APointerThatIsNot256BitAlignedIsAFault) {
  const std::string fault = run(kMisalignedPointer);
  EXPECT_NE(fault.find("not 256-bit (32-byte) aligned"), std::string::npos) << fault;
}

TEST_F(WmmaMisuse, ALeadingDimensionThatIsNotAMultipleOf16BytesIsAFault) {
  const std::string fault = run(kBadLeadingDimension);
  EXPECT_NE(fault.find("ldm 12 is not a multiple of 16 bytes (8 elements of this type)"), std::string::npos) << fault;
}

TEST_F(WmmaMisuse, LanesThatCallDifferentFunctionsAreAFault) {
  const std::string fault = run(kHalfWarpStores);
  EXPECT_NE(fault.find("every lane of a mask must call the same collective"), std::string::npos) << fault;
  EXPECT_NE(fault.find("nvcuda::wmma::"), std::string::npos) << fault;
}

}  // namespace
}  // namespace lab::cuda::emu::test
