// The CPU versions of the matmul lab (matmul_versions.h), real timings on this machine's cores:
//
//   naive        The textbook triple loop, one dot product per element of C. The k loop walks down a column
//                of B, a new cache line for every multiply: memory latency, not arithmetic, sets its speed,
//                and the sum's fixed order keeps the compiler from vectorising it.
//   blocked      The loops reordered (i, k, j) so that the innermost loop runs along rows of B and C:
//                contiguous, so the compiler vectorises it (c[i, j:j+16] += a[i,k] * b[k, j:j+16]). Blocks of
//                kDepthBlock rows of B by kColBlock columns are reused by all the rows of a row block while
//                they sit in the L2 cache. Each FMA still loads and stores C: the store port, not the FMA
//                units, limits it.
//   OpenBLAS     cblas_sgemm: packed panels and a register-blocked assembly micro-kernel that keeps a tile of
//                C in registers for the whole depth. The ceiling for fp32.
//   sbgemm       OpenBLAS's cblas_sbgemm: bf16 inputs, fp32 accumulation (AVX512-BF16 dot products where
//                the CPU has them).
// All run on the CPU backend's OpenMP threads.
#include <algorithm>

#include "ch06_single_gpu/kernels/01_matmul/matmul_versions.h"
#include "common/ops/cpu/gemm.h"

#if defined(LAB_WITH_BLAS) && defined(LAB_HAS_SBGEMM)
#include <cblas.h>
#endif

namespace lab::ch06::matmul {

void cpu_naive(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul CPU naive");
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* cp = c.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < d.M; ++i)
    for (int64_t j = 0; j < d.N; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < d.K; ++k) sum += ap[i * d.K + k] * bp[k * d.N + j];
      cp[i * d.N + j] = sum;
    }
}

void cpu_blocked(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul CPU blocked");
  // A block of B is kDepthBlock x kColBlock floats (512 KiB), which stays in a core's L2 while every row
  // of the row block streams through it.
  constexpr int64_t kRowBlock = 64, kDepthBlock = 256, kColBlock = 512;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* cp = c.data<float>();
  const int64_t row_blocks = (d.M + kRowBlock - 1) / kRowBlock, col_blocks = (d.N + kColBlock - 1) / kColBlock;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t rb = 0; rb < row_blocks; ++rb)
    for (int64_t cb = 0; cb < col_blocks; ++cb) {
      const int64_t i0 = rb * kRowBlock, i1 = std::min(d.M, i0 + kRowBlock);
      const int64_t j0 = cb * kColBlock, j1 = std::min(d.N, j0 + kColBlock);
      for (int64_t i = i0; i < i1; ++i) std::fill(cp + i * d.N + j0, cp + i * d.N + j1, 0.0f);
      for (int64_t k0 = 0; k0 < d.K; k0 += kDepthBlock) {
        const int64_t k1 = std::min(d.K, k0 + kDepthBlock);
        for (int64_t i = i0; i < i1; ++i) {
          float* crow = cp + i * d.N;
          for (int64_t k = k0; k < k1; ++k) {
            const float aik = ap[i * d.K + k];
            const float* brow = bp + k * d.N;
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) crow[j] += aik * brow[j];
          }
        }
      }
    }
}

void cpu_openblas(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::F32, "matmul CPU OpenBLAS");
  ops::cpu::sgemm(false, false, d.M, d.N, d.K, 1.0f, a.data<float>(), d.K, b.data<float>(), d.N, 0.0f, c.data<float>(),
                  d.N);
}

bool cpu_has_sbgemm() {
#if defined(LAB_WITH_BLAS) && defined(LAB_HAS_SBGEMM)
  return true;
#else
  return false;
#endif
}

void cpu_sbgemm(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Dims d = check_dims(c, a, b, DType::BF16, "matmul CPU sbgemm");
#if defined(LAB_WITH_BLAS) && defined(LAB_HAS_SBGEMM)
  if (d.M == 0 || d.N == 0) return;
  const auto as_int = [](int64_t v) {
    LAB_CHECK(v <= (int64_t{1} << 31) - 1, Unsupported, "matmul CPU sbgemm: size ", v, " does not fit an int");
    return static_cast<int>(v);
  };
  cblas_sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, as_int(d.M), as_int(d.N), as_int(d.K), 1.0f,
               static_cast<const bfloat16*>(a.raw()), std::max(as_int(d.K), 1), static_cast<const bfloat16*>(b.raw()),
               as_int(d.N), 0.0f, c.data<float>(), as_int(d.N));
#else
  (void)d;
  fail(ErrorKind::Unsupported, "matmul CPU sbgemm: this build has no OpenBLAS cblas_sbgemm");
#endif
}

}  // namespace lab::ch06::matmul
