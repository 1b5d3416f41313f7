// The kernels of warp_mma_kernels.h: one block of one warp.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/core/error.h"
#include "common/ops/cuda/launch.cuh"
#include "common/ops/cuda/warp_mma.cuh"
#include "tests/ch09_advanced/warp_mma_kernels.h"

namespace lab::test {

namespace {

namespace mma = ops::cuda::mma;

constexpr int kN = 16;
constexpr int kLd = kN + 8;  // 48-byte rows: every ldmatrix row address 16-byte aligned

// The 16 x 16 stored matrix into shared memory (padded rows).
template <typename E>
__device__ void to_shared(E* tile, const E* m) {
  for (int i = threadIdx.x; i < kN * kN; i += 32) tile[(i / kN) * kLd + i % kN] = m[i];
  __syncwarp();
}

// The A fragment of a 16 x 16 A: plain from row-major storage, .trans from column-major.
template <typename E>
__device__ void load_a(uint32_t a[4], const E* tile, bool column_major) {
  const int lane = threadIdx.x % 32;
  if (!column_major)
    mma::ldmatrix_x4(a, tile + mma::a_row(lane) * kLd + mma::a_col(lane));
  else
    mma::ldmatrix_x4_trans(a, tile + mma::bt_row(lane) * kLd + mma::bt_col(lane));
}

// The B fragments of both n8 tiles of a 16 x 16 B: .trans from row-major storage (rows are k), plain from
// column-major (rows are n).
template <typename E>
__device__ void load_b(uint32_t b[2][2], const E* tile, bool column_major) {
  const int lane = threadIdx.x % 32;
  uint32_t r[4];
  if (!column_major)
    mma::ldmatrix_x4_trans(r, tile + mma::a_row(lane) * kLd + mma::a_col(lane));
  else
    mma::ldmatrix_x4(r, tile + mma::bt_row(lane) * kLd + mma::bt_col(lane));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

// The element of a C fragment: register i of n8 tile n of this lane.
__device__ inline int c_row(int i) {
  return threadIdx.x % 32 / 4 + (i / 2) * 8;
}
__device__ inline int c_col(int n, int i) {
  return n * 8 + 2 * (threadIdx.x % 4) + i % 2;
}

template <typename E>
__global__ void warp_product_kernel(float* d, const E* a, bool a_column_major, const E* b, bool b_column_major,
                                    const float* c) {
  alignas(16) __shared__ E a_tile[kN * kLd];
  alignas(16) __shared__ E b_tile[kN * kLd];
  to_shared(a_tile, a);
  to_shared(b_tile, b);
  uint32_t a_frag[4], b_frag[2][2];
  load_a(a_frag, a_tile, a_column_major);
  load_b(b_frag, b_tile, b_column_major);
  for (int n = 0; n < 2; ++n) {
    float acc[4];
    for (int i = 0; i < 4; ++i) acc[i] = c[c_row(i) * kN + c_col(n, i)];
    mma::mma_m16n8k16<E>(acc, a_frag, b_frag[n], acc);
    for (int i = 0; i < 4; ++i) d[c_row(i) * kN + c_col(n, i)] = acc[i];
  }
}

template <typename E>
__global__ void warp_chained_product_kernel(float* e, const E* a, const E* b, const E* b2) {
  alignas(16) __shared__ E a_tile[kN * kLd];
  alignas(16) __shared__ E b_tile[kN * kLd];
  alignas(16) __shared__ E b2_tile[kN * kLd];
  to_shared(a_tile, a);
  to_shared(b_tile, b);
  to_shared(b2_tile, b2);
  uint32_t a_frag[4], b_frag[2][2], b2_frag[2][2];
  load_a(a_frag, a_tile, false);
  load_b(b_frag, b_tile, false);
  load_b(b2_frag, b2_tile, false);
  float first[2][4] = {};
  for (int n = 0; n < 2; ++n) mma::mma_accumulate<E>(first[n], a_frag, b_frag[n]);
  // Columns 0-7 (tile 0) and 8-15 (tile 1) of rows g and g+8: the A fragment of the second product.
  const uint32_t chained[4] = {mma::pack<E>(first[0][0], first[0][1]), mma::pack<E>(first[0][2], first[0][3]),
                               mma::pack<E>(first[1][0], first[1][1]), mma::pack<E>(first[1][2], first[1][3])};
  for (int n = 0; n < 2; ++n) {
    float acc[4] = {};
    mma::mma_accumulate<E>(acc, chained, b2_frag[n]);
    for (int i = 0; i < 4; ++i) e[c_row(i) * kN + c_col(n, i)] = acc[i];
  }
}

void check_operands(const Tensor& result, std::initializer_list<const Tensor*> operands) {
  LAB_CHECK(result.dtype() == DType::F32 && result.numel() == kN * kN, InvalidArgument, "warp mma: f32 [16, 16] out");
  for (const Tensor* t : operands)
    LAB_CHECK(t->dtype() == operands.begin()[0]->dtype() && t->numel() == kN * kN &&
                  (t->dtype() == DType::BF16 || t->dtype() == DType::F16),
              InvalidArgument, "warp mma: 16-bit [16, 16] operands of one dtype");
}

}  // namespace

void warp_product(const Tensor& d, const Tensor& a, Storage a_storage, const Tensor& b, Storage b_storage,
                  const Tensor& c) {
  check_operands(d, {&a, &b});
  ops::cuda::LaunchScope scope(d);
  const bool a_cm = a_storage == Storage::ColumnMajor, b_cm = b_storage == Storage::ColumnMajor;
  if (a.dtype() == DType::BF16)
    LAB_LAUNCH(warp_product_kernel<__nv_bfloat16>, {1, 32, 0, scope.stream()}, d.data<float>(),
               static_cast<const __nv_bfloat16*>(a.raw()), a_cm, static_cast<const __nv_bfloat16*>(b.raw()), b_cm,
               c.data<float>());
  else
    LAB_LAUNCH(warp_product_kernel<__half>, {1, 32, 0, scope.stream()}, d.data<float>(),
               static_cast<const __half*>(a.raw()), a_cm, static_cast<const __half*>(b.raw()), b_cm, c.data<float>());
}

void warp_chained_product(const Tensor& e, const Tensor& a, const Tensor& b, const Tensor& b2) {
  check_operands(e, {&a, &b, &b2});
  ops::cuda::LaunchScope scope(e);
  if (a.dtype() == DType::BF16)
    LAB_LAUNCH(warp_chained_product_kernel<__nv_bfloat16>, {1, 32, 0, scope.stream()}, e.data<float>(),
               static_cast<const __nv_bfloat16*>(a.raw()), static_cast<const __nv_bfloat16*>(b.raw()),
               static_cast<const __nv_bfloat16*>(b2.raw()));
  else
    LAB_LAUNCH(warp_chained_product_kernel<__half>, {1, 32, 0, scope.stream()}, e.data<float>(),
               static_cast<const __half*>(a.raw()), static_cast<const __half*>(b.raw()),
               static_cast<const __half*>(b2.raw()));
}

}  // namespace lab::test
