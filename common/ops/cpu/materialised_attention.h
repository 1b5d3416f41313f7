// What the two CPU backends of materialised attention share (cpu/attention.cpp in f32, cpu/batched_attention.cpp
// in 16-bit storage): the parallel loop over (batch row, head) pairs, each pair being independent, with scratch of
// each thread's own; and the exponentials of one causal softmax row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ops/attention_shape.h"
#include "common/ops/cpu/vec_math.h"

namespace lab::ops::cpu {

// Where one pair's blocks start, in elements: its q in qkv (k and v are C and 2C further on; rows are 3C apart),
// its columns in out (rows C apart), and its T x T matrix in the probabilities.
struct HeadOffsets {
  int64_t qkv, out, probs;
};

// Runs body(at, scratch) for every pair, the pairs split statically over the threads; `scratch` is
// `scratch_floats` floats of the running thread's own, reused from pair to pair.
template <typename Body>
void parallel_over_heads(const AttentionDims& d, int64_t scratch_floats, Body&& body) {
#pragma omp parallel
  {
    std::vector<float> scratch(static_cast<size_t>(scratch_floats));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < d.B * d.NH; ++bh) {
      const int64_t b = bh / d.NH, h = bh % d.NH;
      body(HeadOffsets{b * d.T * 3 * d.C + h * d.HS, b * d.T * d.C + h * d.HS, bh * d.T * d.T}, scratch.data());
    }
  }
}

// Row t of scaled scores, in place: each valid entry (s <= t) becomes exp(row[s] - max), the max over the valid
// entries (so that no exponential overflows); returns their sum, which the caller divides by. The entries above
// the diagonal are left as they are.
inline float exponentiate_causal_row(float* row, int64_t t) {
  float mx = row[0];
  for (int64_t s = 1; s <= t; ++s) mx = row[s] > mx ? row[s] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t s = 0; s <= t; ++s) {
    row[s] = exp_fast(row[s] - mx);
    sum += row[s];
  }
  return sum;
}

}  // namespace lab::ops::cpu
