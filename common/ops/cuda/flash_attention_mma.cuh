// The one tensor-core primitive of the WMMA flash attention kernels (chapter 9's attention lab, v4 and v5): a
// warp multiplies a 16-row strip of a 16-bit matrix by a 16-bit matrix, both in shared memory, into (or onto) an
// f32 strip in shared memory.
//
//     C[16, N] (+)= A[16, K] B[K, N]
//
// Each operand is given row-major (Layout::RowMajor: A [16, K] with row stride lda, B [K, N]) or as its transpose
// stored row-major (Layout::Transposed: A as [K, 16], B as [N, K]): attention multiplies by K^T and V^T, which
// sit in shared memory as the [keys, head] tiles K and V, so "times K^T" is a B read column-major with no
// transposed copy.
//
// This version goes through WMMA (nvcuda::wmma, 16 x 16 x 16 fragments), which the emulation build runs: each
// 16 x 16 block of C is one accumulator fragment, loaded from C (or zeroed), advanced by K/16 mma_sync and stored
// back. The accumulator's lane layout is unspecified, which is why the kernels keep running outputs in shared
// memory, where a row can be rescaled, rather than in fragments. The core's kernels (flash_attention.cu) use
// mma.sync with documented layouts instead (warp_mma.cuh) and keep those values in registers.
//
// Requirements (WMMA's): every lane of the warp calls it with the same arguments; pointers 32-byte aligned;
// leading dimensions multiples of 16 bytes; N and K multiples of 16.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include <type_traits>

namespace lab::ops::cuda::flash {

enum class Layout { RowMajor, Transposed };

template <int N, int K, Layout kA, Layout kB, typename E>
__device__ inline void warp_matmul_16xN(float* c, int ldc, const E* a, int lda, const E* b, int ldb, bool accumulate) {
  namespace wmma = nvcuda::wmma;
  static_assert(N % 16 == 0 && K % 16 == 0, "WMMA works on 16 x 16 x 16 blocks");
  using AFragmentLayout = std::conditional_t<kA == Layout::RowMajor, wmma::row_major, wmma::col_major>;
  using BFragmentLayout = std::conditional_t<kB == Layout::RowMajor, wmma::row_major, wmma::col_major>;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, E, AFragmentLayout> a_frag;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, E, BFragmentLayout> b_frag;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
#pragma unroll
  for (int n = 0; n < N; n += 16) {
    if (accumulate)
      wmma::load_matrix_sync(acc, c + n, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int k = 0; k < K; k += 16) {
      // Row-major A: element (m, k) at a[m * lda + k]; transposed: at a[k * lda + m], a column-major A.
      wmma::load_matrix_sync(a_frag, kA == Layout::RowMajor ? a + k : a + k * lda, lda);
      // Row-major B: element (k, n) at b[k * ldb + n]; transposed: at b[n * ldb + k], a column-major B.
      wmma::load_matrix_sync(b_frag, kB == Layout::RowMajor ? b + k * ldb + n : b + n * ldb + k, ldb);
      wmma::mma_sync(acc, a_frag, b_frag, acc);
    }
    wmma::store_matrix_sync(c + n, acc, ldc, wmma::mem_row_major);
  }
}

}  // namespace lab::ops::cuda::flash
