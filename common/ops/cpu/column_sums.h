// Column sums on the CPU, for the gradients of biases: out[c] += sum over n of rows[n * C + c]. Threads take
// slices of columns and each walks every row of its slice, so there are no atomics and each column's additions
// come in row order, the same bits for any thread count (the CUDA side: common/ops/cuda/column_sums.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

namespace lab::ops::cpu {

// out[c] += sum_n rows[n, c], or = with add false (out is then not read).
inline void add_column_sums(float* out, const float* rows, int64_t N, int64_t C, bool add = true) {
  constexpr int64_t kSlice = 256;  // columns per task: a slice's sums stay in registers and L1
  const int64_t slices = (C + kSlice - 1) / kSlice;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * kSlice, c1 = std::min(C, c0 + kSlice);
    float acc[kSlice] = {};
    for (int64_t n = 0; n < N; ++n) {
      const float* row = rows + n * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = add ? out[c] + acc[c - c0] : acc[c - c0];
  }
}

}  // namespace lab::ops::cpu
